//! `statecraft-echo`: the library's reference operator (see
//! `statecraft_shared::testing::echo`), as a binary for tests, the demo and its image.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    statecraft_shared::runner::main::<statecraft_shared::testing::echo::EchoOperator>().await
}
