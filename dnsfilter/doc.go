// Package dnsfilter is hermetic's filtering DNS forwarder (SPEC §5.2): the
// only resolver a target in the network namespace can reach.
//
// For each query it decides the name with the run's policy before anything
// leaves: a denied name is answered REFUSED (with an Extended DNS Error,
// RFC 8914, "Prohibited", when the client speaks EDNS) and is never sent
// upstream, so a denied name cannot be used to carry data out through DNS.
// REFUSED rather than NXDOMAIN because the name may well exist: NXDOMAIN
// would be cached as a fact about the world and would tell a user that the
// name is misspelled, while REFUSED says that someone refused to answer.
//
// Allowed names are forwarded to the host's resolvers (read from the host's
// resolv.conf before the namespace's one is mounted over it). The answer is
// filtered before the client sees it: A and AAAA records that land in an
// address the policy denies (cloud metadata, link-local, internal ranges in
// the allowlist posture, deny rules) are dropped; SVCB and HTTPS records
// (types 64 and 65), whose address hints would bypass that check, are
// dropped, and queries for those types get an empty answer so that clients
// fall back to A and AAAA; records that do not belong to the chain of names
// from the question are dropped. Localhost names are answered locally with
// loopback (RFC 6761), and --resolve names from a static table.
//
// Every address handed out for an allowed name is recorded, with its TTL,
// in a Learned table that the policy consults (SPEC §3.2 step 6), so a
// client that resolves a name itself and then connects to the address
// through the SOCKS proxy is allowed for as long as the answer is valid.
//
// The package keeps no package-level mutable state: everything lives in a
// Filter and its Learned table.
package dnsfilter
