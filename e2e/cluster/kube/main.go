// Command kube is a multi-call binary holding the Kubernetes components that the local
// test cluster runs. Linking them into one binary shares the (large) common code, so one
// build serves them all. The component is chosen by the name the binary is invoked as
// (a symlink such as kube-apiserver -> kube) or, failing that, by the first argument.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	_ "time/tzdata" // CronJob time zones need the database in the binary.

	"github.com/spf13/cobra"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

var components = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kube-proxy":              proxy.NewProxyCommand,
	"kubelet":                 func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := components[name]; !ok && name != "kubectl" {
		if len(os.Args) < 2 {
			fmt.Fprintln(os.Stderr, "usage: kube <kube-apiserver|kube-controller-manager|kube-scheduler|kube-proxy|kubelet|kubectl> [flags]")
			os.Exit(2)
		}
		name = os.Args[1]
		os.Args = os.Args[1:]
	}
	if name == "kubectl" {
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) // nolint:errcheck
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
		return
	}
	newCommand, ok := components[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "kube: unknown component %q\n", name)
		os.Exit(2)
	}
	os.Exit(cli.Run(newCommand()))
}
