//! Real servers for tests (feature `testing`): [`apiserver`] starts etcd and
//! kube-apiserver built from their Go modules by `scripts/build-kube.sh`; [`s3`] starts a
//! real S3 server. Each is started on free loopback ports in its own temporary directory
//! and stopped when dropped, so tests never share state.

pub mod apiserver;
pub mod s3;
