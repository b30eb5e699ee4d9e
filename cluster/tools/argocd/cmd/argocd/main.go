// Command argocd is the part of Argo CD's multicall binary that kubetrain runs
// (cluster/argocd.py): the application controller and the repo server, picked by the name
// the binary is started under, as upstream's cmd/main.go picks them. Leaving out the API
// server, the UI, Dex, notifications, the ApplicationSet controller and the CLI keeps
// their dependencies out of the build. "argocd version" prints the version the build is
// stamped with (cluster/cluster.mk checks it).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	appcontroller "github.com/argoproj/argo-cd/v3/cmd/argocd-application-controller/commands"
	reposerver "github.com/argoproj/argo-cd/v3/cmd/argocd-repo-server/commands"
	"github.com/argoproj/argo-cd/v3/common"
	"github.com/argoproj/argo-cd/v3/util/log"
)

func init() {
	// Upstream's main routes klog (client-go's logging) through Argo CD's logger.
	klog.SetLogger(log.NewLogrusLogger(log.NewWithCurrentConfig()))
}

func main() {
	var command *cobra.Command
	switch name := filepath.Base(os.Args[0]); name {
	case "argocd-application-controller":
		command = appcontroller.NewCommand()
	case "argocd-repo-server":
		command = reposerver.NewCommand()
	default:
		if len(os.Args) == 2 && os.Args[1] == "version" {
			fmt.Printf("argocd: %s\n", common.GetVersion().Version)
			return
		}
		fmt.Fprintf(os.Stderr, "%s: start it as argocd-application-controller or "+
			"argocd-repo-server (a link to it), or run '%s version'\n", name, name)
		os.Exit(2)
	}
	if err := command.Execute(); err != nil {
		os.Exit(1)
	}
}
