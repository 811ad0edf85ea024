// Package redisstore is the Redis implementation of [registry.Store]
// (ADR 0005, docs/decisions/0005-snapshots-stores-and-failure-isolation.md):
// the snapshot and listing keys and their pipelined operations, the Redis URL
// syntax of the --redis flag and the redis config key (redis_url.go), and the
// toolmesh_redis_* metrics. The registry only sees the Store interfaces it
// defines; internal/app wires this store in when Redis is configured.
package redisstore
