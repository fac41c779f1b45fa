//! `statecraft-etcd`: the binary. Everything it does is in the library half and in
//! `statecraft-shared`.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    statecraft_shared::runner::main::<statecraft_etcd::EtcdOperator>().await
}
