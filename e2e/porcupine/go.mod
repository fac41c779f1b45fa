// Module statecraft-porcupine checks the histories the e2e tests record for
// linearizability with porcupine (github.com/anishathalye/porcupine), a checker written
// outside this project, so that the tests' verdicts do not rest on our own reasoning.
module statecraft.io/e2e/porcupine

go 1.24

require github.com/anishathalye/porcupine v1.3.1
