package semaphore

// setOrder records that the policy of service name was given (an ordering
// option, or WithBarging, which excludes them): a second, different one
// makes configure refuse the pair. (Helper pri's branch defines the same
// in turn.go; on merge keep one.)
func (c *config) setOrder(name string) {
	if c.order != "" && c.order != name && c.orderClash == "" {
		c.orderClash = c.order + " and " + name
	}
	c.order = name
}
