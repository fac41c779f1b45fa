//! `statecraft-echo`: the library's reference operator (see
//! `statecraft_shared::testing::echo`), as a binary for tests, the demo and its image.
// No panics on what a user or the network controls: `make check` (clippy) refuses
// unwrap, expect and panic outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    statecraft_shared::runner::main::<statecraft_shared::testing::echo::EchoOperator>().await
}
