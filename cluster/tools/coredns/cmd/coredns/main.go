// Command coredns is CoreDNS with only the plugins the real node's Corefile uses
// (cluster/node_config.py, corefile: bind, errors, health, ready, kubernetes, cache and
// loop). Upstream's main package (the module root) links every plugin of
// core/plugin/zplugin.go, among them route53, azure, clouddns, etcd, dnstap and trace,
// whose cloud SDKs and tracers are most of a cold build and none of which the node runs.
// It starts as upstream's does: coremain.Run, with upstream's directive order
// (core/dnsserver/zdirectives.go); a Corefile naming a plugin left out here fails at
// start with "unknown directive" (tests/unit/cluster checks the Corefile's against this
// list).
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() {
	coremain.Run()
}
