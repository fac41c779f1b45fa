//! The default server image of a flavor and version. The MariaDB image name comes from
//! `deploy/images/images.env` (`MARIADB_IMAGE`), the one place image names live, so the
//! operator runs exactly what the local cluster has imported.

use statecraft_shared::deploy::operand_image;

use crate::api::Flavor;
use crate::validate::Version;

/// The repository of the official MySQL image (not built here: MySQL 8 cannot be installed
/// on this project's machines).
const MYSQL_REPOSITORY: &str = "docker.io/library/mysql";
/// The repository of the official MariaDB image.
const MARIADB_REPOSITORY: &str = "docker.io/library/mariadb";

/// The repository of the Prometheus project's mysqld_exporter image.
const EXPORTER_REPOSITORY: &str = "docker.io/prom/mysqld-exporter";
/// The mysqld_exporter release the sidecar's flags and grants are written for (and that
/// `deploy/images/mysqld-exporter/go.mod` pins).
pub const EXPORTER_VERSION: &str = "v0.16.0";

/// The metrics sidecar's image: `MYSQLD_EXPORTER_IMAGE` of images.env (as built here), or
/// the official one of [`EXPORTER_VERSION`].
pub fn default_exporter_image() -> String {
    operand_image("MYSQLD_EXPORTER_IMAGE", EXPORTER_REPOSITORY, EXPORTER_VERSION)
}

/// The image of `flavor` at `version`: for MariaDB, `MARIADB_IMAGE` of images.env when its
/// tag is the version's series (as built here), else the same repository tagged with the
/// version; for MySQL, the official image tagged with the version.
pub fn default_image(flavor: Flavor, version: &Version) -> String {
    match flavor {
        // images.env is compiled in and has MARIADB_IMAGE (a unit test says so); were it
        // missing, the official repository is the image users would expect.
        Flavor::Mariadb => operand_image("MARIADB_IMAGE", MARIADB_REPOSITORY, &version.to_string()),
        Flavor::Mysql => format!("{MYSQL_REPOSITORY}:{version}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use statecraft_shared::deploy::images_env;

    #[test]
    fn mariadb_default_is_the_image_built_here() {
        let v = Version::parse("10.11").unwrap();
        assert_eq!(default_image(Flavor::Mariadb, &v), images_env("MARIADB_IMAGE").unwrap());
        assert_eq!(default_image(Flavor::Mariadb, &v), "docker.io/library/mariadb:10.11");
        let v = Version::parse("11.4.2").unwrap();
        assert_eq!(default_image(Flavor::Mariadb, &v), "docker.io/library/mariadb:11.4.2");
    }

    #[test]
    fn exporter_default_is_the_image_built_here_of_the_pinned_release() {
        assert_eq!(default_exporter_image(), images_env("MYSQLD_EXPORTER_IMAGE").unwrap());
        assert_eq!(default_exporter_image(), format!("{EXPORTER_REPOSITORY}:{EXPORTER_VERSION}"));
        let go_mod = include_str!("../../../deploy/images/mysqld-exporter/go.mod");
        assert!(
            go_mod.contains(&format!("github.com/prometheus/mysqld_exporter {EXPORTER_VERSION}")),
            "deploy/images/mysqld-exporter/go.mod pins another release than {EXPORTER_VERSION}"
        );
    }

    #[test]
    fn mysql_default_is_the_official_image() {
        assert_eq!(default_image(Flavor::Mysql, &Version::parse("8.4").unwrap()), "docker.io/library/mysql:8.4");
    }
}
