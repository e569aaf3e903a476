// Package config owns relay's configuration: the names of its environment
// variables, their defaults, parsing and validation, and the librdkafka
// properties passed through from RELAY_KAFKA_*.
//
// Configuration is read once, from the environment only (12-factor), and is
// validated as a whole before relay connects to anything: every problem is
// reported with the variable's name. This package must not open connections,
// start goroutines or exit the process.
package config
