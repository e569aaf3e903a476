// Package schema owns schema admission: the Confluent wire format (with
// Protobuf's message-index array), the registry lookups (bounded in time,
// typed errors, bounded cache, references resolved), the check of a
// writer's version against the accepted set, decoding in each format the
// registry serves (Avro, Protobuf, JSON Schema), and the upcast of every
// accepted record to one canonical reader version.
//
// Failures come back as *tiers.Error with their cause; the package never
// decides what becomes of a record, and never touches Kafka.
package schema
