package rowlock

// StripeOf exposes stripeOf to the external tests, which block a fresh
// name's insert by locking its stripe's counter.
var StripeOf = stripeOf
