//! The roll planner and its gates, pure functions over observed state (being written).
