//! Kafka's metadata.version levels by name. The wire (ApiVersions, UpdateFeatures) carries
//! only the feature level, a number; users, the status and Kafka's own tools speak of names
//! such as `4.4-IV2`. The table is Kafka 4.4.0's production levels, read from the real jar
//! (`org.apache.kafka.server.common.MetadataVersion.values()`: `featureLevel()` and
//! `version()`, `isProduction()`); 34 (`4.5-IV0`) is not production in 4.4.0 and is left out.

/// The feature's name in ApiVersions and UpdateFeatures.
pub const FEATURE: &str = "metadata.version";

/// (feature level, name) of every production metadata.version Kafka 4.4.0 knows.
const LEVELS: &[(i16, &str)] = &[
    (7, "3.3-IV3"),
    (8, "3.4-IV0"),
    (9, "3.5-IV0"),
    (10, "3.5-IV1"),
    (11, "3.5-IV2"),
    (12, "3.6-IV0"),
    (13, "3.6-IV1"),
    (14, "3.6-IV2"),
    (15, "3.7-IV0"),
    (16, "3.7-IV1"),
    (17, "3.7-IV2"),
    (18, "3.7-IV3"),
    (19, "3.7-IV4"),
    (20, "3.8-IV0"),
    (21, "3.9-IV0"),
    (22, "4.0-IV0"),
    (23, "4.0-IV1"),
    (24, "4.0-IV2"),
    (25, "4.0-IV3"),
    (26, "4.1-IV0"),
    (27, "4.1-IV1"),
    (28, "4.2-IV0"),
    (29, "4.2-IV1"),
    (30, "4.3-IV0"),
    (31, "4.4-IV0"),
    (32, "4.4-IV1"),
    (33, "4.4-IV2"),
];

/// The name of metadata.version `level`, if it is a production level this table knows.
pub fn name(level: i16) -> Option<&'static str> {
    LEVELS.iter().find(|(l, _)| *l == level).map(|(_, name)| *name)
}

/// The newest level of release series `(major, minor)`: the level a roll to that release
/// finalizes.
pub fn latest_of(series: (u32, u32)) -> Option<i16> {
    let prefix = format!("{}.{}-", series.0, series.1);
    LEVELS.iter().filter(|(_, name)| name.starts_with(&prefix)).map(|(level, _)| *level).max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_have_kafkas_names_and_each_release_its_newest_level() {
        assert_eq!(name(31), Some("4.4-IV0"));
        assert_eq!(name(34), None);
        assert_eq!(latest_of((4, 4)), Some(33));
        assert_eq!(latest_of((4, 3)), Some(30));
        assert_eq!(latest_of((5, 0)), None);
        assert!(LEVELS.windows(2).all(|w| w[0].0 + 1 == w[1].0), "levels are consecutive");
    }
}
