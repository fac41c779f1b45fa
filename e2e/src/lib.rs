//! The end-to-end suite of the Statecraft operators. The local cluster and the e2e tests
//! are not written yet; `tests/` holds checks over what the operators ship.
