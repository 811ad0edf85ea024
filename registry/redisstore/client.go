package redisstore

import "github.com/redis/go-redis/v9"

// Client is the store's Redis client, for the parts of the gateway that
// keep their own keys on the same Redis (pinned tool definitions).
func (s *RedisStore) Client() redis.UniversalClient { return s.client }
