//! The objects of a cluster, built from its spec by pure functions (being written).
