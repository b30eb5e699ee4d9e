// Command etcd is the etcd server, built from the go.etcd.io/etcd/server/v3 release
// that the pinned Kubernetes depends on, so the control plane needs no prebuilt
// download. It behaves exactly like the upstream etcd binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
