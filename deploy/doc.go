// Package deploy holds the files that run Tollgate in production, such as
// the load balancer's configuration (haproxy.cfg), and the tests that run
// them: the production layout (PostgreSQL, one chain, several serve
// replicas, HAProxy in front) built from real processes on loopback
// ports, paid through, and broken on purpose. It has no code of its own.
package deploy
