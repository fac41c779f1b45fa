// Command statecraft-loop-csi is the local test cluster's expandable storage: a CSI driver
// whose volumes are XFS file systems in sparse image files, mounted through loop devices.
//
// The cluster's default StorageClass (the controller-manager's host-path provisioner)
// cannot grow a volume, so nothing on the local cluster could show a volume growing while
// its server runs. This driver can, with the real parts a user's cluster has: the CSI
// sidecars' external-provisioner and external-resizer (built from their Go modules) ask it
// to create and grow volumes, the kubelet asks it to publish them and to grow the file
// system of a mounted one (NodeExpandVolume, online: xfs_growfs on the mount), and the
// kubelet's plugin registration finds it through its registration socket (the
// node-driver-registrar's job, done here in-process because that module is not served
// here). XFS because growing a mounted ext4 needs CAP_SYS_RESOURCE, which these machines
// withhold; XFS needs CAP_SYS_ADMIN, which the host's root has.
//
// It runs on the node as a host process, like the kubelet: one process serves the
// controller and node services on one socket. Test infrastructure only.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Driver is the CSI driver's name, the StorageClass's provisioner.
const Driver = "loop.csi.statecraft.io"

// minSize is the smallest XFS file system mkfs.xfs makes (300 MiB).
const minSize = 300 << 20

type driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer
	dir  string // where the images live
	node string
}

func main() {
	endpoint := flag.String("endpoint", "", "unix socket the CSI services listen on")
	registrationDir := flag.String("registration-dir", "", "the kubelet's plugins_registry directory")
	dir := flag.String("volumes", "", "directory of the volume images")
	node := flag.String("node", "", "the node's name")
	flag.Parse()
	if *endpoint == "" || *registrationDir == "" || *dir == "" || *node == "" {
		log.Fatal("--endpoint, --registration-dir, --volumes and --node are required")
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		log.Fatal(err)
	}
	d := &driver{dir: *dir, node: *node}

	csiServer := grpc.NewServer(grpc.UnaryInterceptor(serialized))
	csi.RegisterIdentityServer(csiServer, d)
	csi.RegisterControllerServer(csiServer, d)
	csi.RegisterNodeServer(csiServer, d)
	regServer := grpc.NewServer()
	registration.RegisterRegistrationServer(regServer, &registrar{endpoint: *endpoint})

	errs := make(chan error, 2)
	go func() { errs <- serve(csiServer, *endpoint) }()
	go func() { errs <- serve(regServer, filepath.Join(*registrationDir, Driver+"-reg.sock")) }()
	log.Fatal(<-errs)
}

func serve(s *grpc.Server, socket string) error {
	_ = os.Remove(socket)
	if err := os.MkdirAll(filepath.Dir(socket), 0o750); err != nil {
		return err
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	log.Printf("serving on %s", socket)
	return s.Serve(l)
}

// one is held by every call: one volume operation at a time, since loop devices, mounts and
// images are shared state.
var one sync.Mutex

// serialized runs each call alone and logs what changed something or failed.
func serialized(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	one.Lock()
	resp, err := h(ctx, req)
	one.Unlock()
	if err != nil {
		log.Printf("%s: %v", info.FullMethod, err)
	} else if !strings.Contains(info.FullMethod, "Probe") && !strings.Contains(info.FullMethod, "Get") {
		log.Printf("%s: ok", info.FullMethod)
	}
	return resp, err
}

// registrar answers the kubelet's plugin watcher, as the node-driver-registrar would.
type registrar struct {
	registration.UnimplementedRegistrationServer
	endpoint string
}

func (r *registrar) GetInfo(context.Context, *registration.InfoRequest) (*registration.PluginInfo, error) {
	return &registration.PluginInfo{Type: registration.CSIPlugin, Name: Driver, Endpoint: r.endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, s *registration.RegistrationStatus) (*registration.RegistrationStatusResponse, error) {
	if !s.PluginRegistered {
		log.Printf("the kubelet refused the registration: %s", s.Error)
	}
	return &registration.RegistrationStatusResponse{}, nil
}

// Identity.

func (d *driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: Driver, VendorVersion: "1"}, nil
}

func (d *driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	service := func(t csi.PluginCapability_Service_Type) *csi.PluginCapability {
		return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}}
	}
	online := &csi.PluginCapability{Type: &csi.PluginCapability_VolumeExpansion_{
		VolumeExpansion: &csi.PluginCapability_VolumeExpansion{Type: csi.PluginCapability_VolumeExpansion_ONLINE}}}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{service(csi.PluginCapability_Service_CONTROLLER_SERVICE), online}}, nil
}

func (d *driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

// Controller.

func (d *driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	rpc := func(t csi.ControllerServiceCapability_RPC_Type) *csi.ControllerServiceCapability {
		return &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}}
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{
		rpc(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME), rpc(csi.ControllerServiceCapability_RPC_EXPAND_VOLUME),
	}}, nil
}

func (d *driver) image(id string) (string, error) {
	if id == "" || strings.ContainsAny(id, "/.") {
		return "", status.Errorf(codes.InvalidArgument, "bad volume id %q", id)
	}
	return filepath.Join(d.dir, id+".img"), nil
}

// size is the bytes a request asks for, at least minSize, rounded up to a MiB.
func size(r *csi.CapacityRange) int64 {
	n := r.GetRequiredBytes()
	if n < minSize {
		n = minSize
	}
	return (n + (1<<20 - 1)) &^ (1<<20 - 1)
}

func (d *driver) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	img, err := d.image(req.GetName())
	if err != nil {
		return nil, err
	}
	n := size(req.GetCapacityRange())
	if _, err := os.Stat(img); os.IsNotExist(err) {
		if err := run("truncate", "-s", fmt.Sprint(n), img+".new"); err != nil {
			return nil, err
		}
		if err := run("mkfs.xfs", "-q", img+".new"); err != nil {
			return nil, err
		}
		if err := os.Rename(img+".new", img); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	fi, err := os.Stat(img)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: req.GetName(), CapacityBytes: fi.Size()}}, nil
}

func (d *driver) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	img, err := d.image(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if err := os.Remove(img); err != nil && !os.IsNotExist(err) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.DeleteVolumeResponse{}, nil
}

func (d *driver) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{VolumeCapabilities: req.GetVolumeCapabilities()}}, nil
}

// ControllerExpandVolume grows the image; the kubelet then grows the file system.
func (d *driver) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	img, err := d.image(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(img)
	if err != nil {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	n := size(req.GetCapacityRange())
	if n > fi.Size() {
		if err := os.Truncate(img, n); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	} else {
		n = fi.Size()
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: n, NodeExpansionRequired: true}, nil
}

// Node.

func (d *driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.node}, nil
}

func (d *driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_EXPAND_VOLUME}},
	}}}, nil
}

// loopOf is the loop device attached to img, if any.
func loopOf(img string) (string, error) {
	out, err := exec.Command("losetup", "-j", img, "-O", "NAME", "-n").Output()
	if err != nil {
		return "", status.Errorf(codes.Internal, "losetup -j %s: %v", img, err)
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]), nil
}

func mounted(path string) bool {
	return exec.Command("mountpoint", "-q", path).Run() == nil
}

func (d *driver) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	img, err := d.image(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	target := req.GetTargetPath()
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if mounted(target) {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	dev, err := loopOf(img)
	if err != nil {
		return nil, err
	}
	if dev == "" {
		out, err := exec.Command("losetup", "-f", "--show", img).Output()
		if err != nil {
			return nil, status.Errorf(codes.Internal, "losetup %s: %v", img, err)
		}
		dev = strings.TrimSpace(string(out))
	}
	args := []string{dev, target}
	if req.GetReadonly() {
		args = append([]string{"-o", "ro"}, args...)
	}
	if err := run("mount", args...); err != nil {
		return nil, err
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (d *driver) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	img, err := d.image(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	target := req.GetTargetPath()
	if mounted(target) {
		if err := run("umount", target); err != nil {
			return nil, err
		}
	}
	_ = os.Remove(target)
	if dev, err := loopOf(img); err == nil && dev != "" {
		if err := run("losetup", "-d", dev); err != nil {
			return nil, err
		}
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeExpandVolume grows the mounted file system to the grown image: online.
func (d *driver) NodeExpandVolume(_ context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	img, err := d.image(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	dev, err := loopOf(img)
	if err != nil {
		return nil, err
	}
	if dev == "" {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not attached", req.GetVolumeId())
	}
	if err := run("losetup", "-c", dev); err != nil {
		return nil, err
	}
	if err := run("xfs_growfs", req.GetVolumePath()); err != nil {
		return nil, err
	}
	fi, err := os.Stat(img)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: fi.Size()}, nil
}

func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return status.Errorf(codes.Internal, "%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
