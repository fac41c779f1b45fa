//! The image names of the cluster, read from `deploy/images/images.env`, the one place they
//! are written down (the image build, the cluster and the tests all read it).

const IMAGES_ENV: &str = include_str!("../../deploy/images/images.env");

/// The image named by `key` in `images.env` (e.g. `MARIADB_IMAGE`).
pub fn image(key: &str) -> Option<&'static str> {
    all().into_iter().find(|(k, _)| *k == key).map(|(_, v)| v)
}

/// Every `(KEY, image)` in `images.env`, in file order.
pub fn all() -> Vec<(&'static str, &'static str)> {
    IMAGES_ENV
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn images_env_names_the_images_pods_use() {
        assert!(super::image("PAUSE_IMAGE").is_some_and(|i| i.starts_with("registry.k8s.io/pause:")));
        assert!(super::image("MARIADB_IMAGE").is_some_and(|i| i.contains("mariadb:")));
        assert!(super::all().len() >= 7);
        assert_eq!(super::image("NOPE"), None);
    }
}
