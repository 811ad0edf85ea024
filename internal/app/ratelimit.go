package app

import (
	"fmt"
)

// checkRLSTimeout checks that an RLS call fits in Envoy's wait for the
// extproc server (rateLimits itself is checked by AccessConfig.Validate).
func (c *Config) checkRLSTimeout() error {
	if c.RateLimits != nil && c.RateLimits.RLS != nil && c.RateLimits.RLS.Timeout.D() >= c.MessageTimeout.D() && c.MessageTimeout > 0 {
		return fmt.Errorf("rateLimits.rls.timeout: %s must be below messageTimeout (%s): Envoy fails a request whose ext_proc answer takes longer",
			c.RateLimits.RLS.Timeout.D(), c.MessageTimeout.D())
	}
	return nil
}
