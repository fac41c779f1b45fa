//! `statecraft-kafka`: the binary. Everything it does is in the library half and in
//! `statecraft-shared`.
// No panics on what a user or the network controls: `make check` (clippy) refuses
// unwrap, expect and panic outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    statecraft_shared::runner::main::<statecraft_kafka::KafkaOperator>().await
}
