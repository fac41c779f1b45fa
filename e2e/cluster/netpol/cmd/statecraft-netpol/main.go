// Command statecraft-netpol enforces NetworkPolicies on the local test cluster's node:
// Kubernetes SIG Network's kube-network-policies controller (its own policy evaluation, the
// library of the sigs.k8s.io/kube-network-policies module), fed by an iptables NFQUEUE rule.
//
// kube-network-policies sends the first packet of each connection to user space through a
// netfilter queue, judges it against the NetworkPolicies of its source and destination pods
// and accepts or drops it; later packets of an accepted connection pass by conntrack. Its own
// nftables rules use nftables' `queue` expression, which the kernels of these machines lack
// (the rule fails "No such file or directory"); their iptables NFQUEUE target works, so
// up.sh queues the same packets with iptables (chain STATECRAFT-NETPOL) and this program runs
// the controller, whose failing nftables sync is retried and harmless. kube-router, the
// other enforcer that builds offline, is served only at v2.1.0, which has reported security
// flaws. Test infrastructure only.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	node := flag.String("node", "", "the node's name")
	queue := flag.Int("queue", 100, "the netfilter queue the iptables rule sends packets to")
	klog.InitFlags(nil)
	flag.Parse()

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatalf("kubeconfig: %v", err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		klog.Fatalf("client: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	factory := informers.NewSharedInformerFactory(client, 10*time.Minute)
	controller, err := networkpolicy.NewController(
		client,
		factory.Networking().V1().NetworkPolicies(),
		factory.Core().V1().Namespaces(),
		factory.Core().V1().Pods(),
		factory.Core().V1().Nodes(),
		nil, nil, nil,
		// NRI stays "enabled": containerd 1.6 has none, so its plugin never connects and the
		// pods' addresses come from the API server; but v0.8.0 looks an address it does not
		// know up in that plugin, which must therefore exist (NRIdisabled leaves it nil and
		// the first packet from a non-pod address panics).
		networkpolicy.Config{QueueID: *queue, NodeName: *node},
	)
	if err != nil {
		klog.Fatalf("controller: %v", err)
	}
	factory.Start(ctx.Done())
	if err := controller.Run(ctx); err != nil {
		klog.Fatalf("controller: %v", err)
	}
}
