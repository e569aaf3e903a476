// Package telemetry owns relay's metrics and its operational HTTP endpoint
// (/metrics in Prometheus format, /livez, /readyz). Instruments are
// OpenTelemetry instruments; the Prometheus exporter reads them on scrape.
//
// It observes the transactional loop through txn.Observer and must never
// block it: instruments are lock-free or briefly locked.
package telemetry
