// Command etcdctl is etcd's client CLI, built from the pinned etcd release.
package main

import "go.etcd.io/etcd/etcdctl/v3/ctlv3"

func main() { ctlv3.MustStart() }
