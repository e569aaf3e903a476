package buildinfo

/*
// The C libraries librdkafka's static build bundles, asked for their own
// versions: what is linked, not what a list says.
extern const char *OpenSSL_version(int t);
extern const char *zlibVersion(void);
extern const char *ZSTD_versionString(void);
extern const char *LZ4_versionString(void);
extern char *curl_version(void);
*/
import "C"

import "strings"

// Library is a C library linked into relay and its version.
type Library struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Libraries are the C libraries linked in with librdkafka (OpenSSL,
// zlib, zstd, lz4, libcurl), each with the version it reports.
func Libraries() []Library {
	openssl := strings.Fields(C.GoString(C.OpenSSL_version(0))) // "OpenSSL 3.0.15 3 Sep 2024"
	ossl := ""
	if len(openssl) > 1 {
		ossl = openssl[1]
	}
	curl := strings.TrimPrefix(strings.Fields(C.GoString(C.curl_version()) + " ")[0], "libcurl/") // "libcurl/8.10.1 OpenSSL/3.0.15 ..."
	return []Library{
		{"openssl", ossl},
		{"zlib", C.GoString(C.zlibVersion())},
		{"zstd", C.GoString(C.ZSTD_versionString())},
		{"lz4", C.GoString(C.LZ4_versionString())},
		{"libcurl", curl},
	}
}
