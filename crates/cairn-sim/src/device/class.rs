//! Device classes: the per-access latency and the sequential bandwidth of one
//! kind of storage (or of DRAM).
//!
//! The access latencies of the built-in classes are Table 1 ("Device Access
//! Delay", §3.1) of `000_d04706aa48332137.txt`: HDD 11494 µs, SSD 141 µs,
//! Optane SSD 25 µs, PM 0.80 µs, DRAM 0.13 µs. The paper measured the three
//! drives with fio at a 1 KB block size, DRAM with a 1 KB `memcpy`, and
//! emulated PM with Quartz at 7-8x the DRAM latency (§3.1, §5.1).
//!
//! The paper gives **no bandwidths**. The sequential bandwidths below are
//! cairn's own assumptions, typical orders of magnitude for each class
//! (docs/device-model.md, "Device table"), not measurements.
//!
//! Custom classes come from a TOML file ([`load_classes`]):
//!
//! ```toml
//! [[class]]
//! name = "nvme"
//! latency_us = 80
//! bandwidth_mb_s = 3000
//! ```

use std::path::Path;

use cairn_core::{Error, Result};
use serde::{Deserialize, Serialize};

/// One kind of device: what one access costs and how fast it streams.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceClass {
    /// Display name (`HDD`, `Optane`, or a custom name).
    pub name: String,
    /// Latency of one access, microseconds (`000` Table 1 for built-ins).
    pub access_latency_us: f64,
    /// Sequential transfer rate, MB/s with 1 MB = 10^6 bytes (cairn's assumption for built-ins).
    pub seq_bandwidth_mb_s: f64,
}

/// Table 1 of `000` (§3.1), read latency per access in µs, in the paper's order.
pub const TABLE1_LATENCY_US: [(&str, f64); 5] = [
    ("HDD", 11494.0),
    ("SSD", 141.0),
    ("Optane SSD", 25.0),
    ("PM", 0.80),
    ("DRAM", 0.13),
];

/// Built-in classes: (name, Table 1 latency µs, assumed bandwidth MB/s, aliases).
const BUILTINS: [(&str, f64, f64, &[&str]); 5] = [
    ("HDD", 11494.0, 150.0, &[]),
    ("SSD", 141.0, 500.0, &[]),
    (
        "Optane",
        25.0,
        2000.0,
        &["optane ssd", "optane-ssd", "optane_ssd"],
    ),
    ("PM", 0.80, 6000.0, &["pmem", "persistent memory"]),
    ("DRAM", 0.13, 20000.0, &["memory"]),
];

impl DeviceClass {
    /// The built-in classes' names as the command line writes them, slowest
    /// first ([`Self::by_name`] accepts them and a few aliases, any case).
    pub const BUILTIN_NAMES: [&'static str; 5] = ["hdd", "ssd", "optane", "pm", "dram"];
    /// The classes a real repository's index can be on (`--lookup-device`):
    /// the built-ins but DRAM.
    pub const INDEX_DEVICE_NAMES: [&'static str; 4] = ["hdd", "ssd", "optane", "pm"];
    /// The class `cairn sim` models unless told otherwise.
    pub const DEFAULT_NAME: &'static str = "hdd";

    /// A validated class: a non-empty name, a positive finite latency and bandwidth.
    pub fn new(
        name: impl Into<String>,
        access_latency_us: f64,
        seq_bandwidth_mb_s: f64,
    ) -> Result<Self> {
        let class = DeviceClass {
            name: name.into(),
            access_latency_us,
            seq_bandwidth_mb_s,
        };
        class.validate().map_err(Error::invalid)?;
        Ok(class)
    }

    fn validate(&self) -> std::result::Result<(), String> {
        if self.name.trim().is_empty() {
            return Err("device class name is empty".into());
        }
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !positive(self.access_latency_us) {
            return Err(format!(
                "device class {:?}: latency_us must be a positive finite number, got {}",
                self.name, self.access_latency_us
            ));
        }
        if !positive(self.seq_bandwidth_mb_s) {
            return Err(format!(
                "device class {:?}: bandwidth_mb_s must be a positive finite number, got {}",
                self.name, self.seq_bandwidth_mb_s
            ));
        }
        Ok(())
    }

    fn builtin(i: usize) -> Self {
        let (name, lat, bw, _) = BUILTINS[i];
        DeviceClass {
            name: name.to_string(),
            access_latency_us: lat,
            seq_bandwidth_mb_s: bw,
        }
    }

    /// Hard disk: 11494 µs (`000` Table 1), 150 MB/s (assumed).
    pub fn hdd() -> Self {
        Self::builtin(0)
    }

    /// SATA flash SSD: 141 µs (`000` Table 1), 500 MB/s (assumed).
    pub fn ssd() -> Self {
        Self::builtin(1)
    }

    /// Optane SSD: 25 µs (`000` Table 1), 2000 MB/s (assumed).
    pub fn optane() -> Self {
        Self::builtin(2)
    }

    /// Persistent memory: 0.80 µs (`000` Table 1), 6000 MB/s (assumed).
    pub fn pm() -> Self {
        Self::builtin(3)
    }

    /// DRAM: 0.13 µs (`000` Table 1), 20000 MB/s (assumed).
    pub fn dram() -> Self {
        Self::builtin(4)
    }

    /// The five built-in classes, slowest first.
    pub fn builtins() -> Vec<DeviceClass> {
        (0..BUILTINS.len()).map(Self::builtin).collect()
    }

    /// A built-in class by name, case-insensitively (`hdd`, `Optane`,
    /// `optane-ssd`, `pmem`, ...). `None` for an unknown name.
    pub fn by_name(name: &str) -> Option<DeviceClass> {
        let want = name.trim();
        BUILTINS
            .iter()
            .position(|(n, _, _, aliases)| {
                n.eq_ignore_ascii_case(want) || aliases.iter().any(|a| a.eq_ignore_ascii_case(want))
            })
            .map(Self::builtin)
    }

    /// Latency of one access in seconds.
    pub fn latency_seconds(&self) -> f64 {
        self.access_latency_us * 1e-6
    }

    /// Sequential bandwidth in bytes per second.
    pub fn bytes_per_second(&self) -> f64 {
        self.seq_bandwidth_mb_s * 1e6
    }

    /// Modeled seconds of `accesses` accesses moving `bytes` bytes in total:
    /// `accesses * latency + bytes / bandwidth`.
    pub fn seconds(&self, accesses: u64, bytes: u64) -> f64 {
        accesses as f64 * self.latency_seconds() + bytes as f64 / self.bytes_per_second()
    }

    /// Modeled seconds of one I/O of `bytes` bytes: `latency + bytes / bandwidth`.
    pub fn io_seconds(&self, bytes: u64) -> f64 {
        self.seconds(1, bytes)
    }
}

/// A class by name: first among `custom` (exact name, case-insensitively),
/// then among the built-ins ([`DeviceClass::by_name`]). Custom classes may
/// shadow built-ins.
pub fn find_class(name: &str, custom: &[DeviceClass]) -> Option<DeviceClass> {
    let want = name.trim();
    custom
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(want))
        .cloned()
        .or_else(|| DeviceClass::by_name(want))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClassFile {
    #[serde(default)]
    class: Vec<RawClass>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClass {
    name: String,
    latency_us: f64,
    bandwidth_mb_s: f64,
}

/// Parses custom classes from TOML text (`[[class]] name latency_us
/// bandwidth_mb_s`). `origin` (a path, or `"<string>"`) prefixes every error.
/// Rejects syntax errors, unknown or missing fields, non-positive or
/// non-finite numbers, empty and duplicate (case-insensitive) names, and a
/// file without any class.
pub fn parse_classes(text: &str, origin: &str) -> Result<Vec<DeviceClass>> {
    let fail = |msg: String| Error::invalid(format!("device classes {origin}: {msg}"));
    let file: ClassFile = toml::from_str(text).map_err(|e| fail(one_line(text, &e)))?;
    if file.class.is_empty() {
        return Err(fail(
            "no [[class]] entries (expected `[[class]] name = .. latency_us = .. bandwidth_mb_s = ..`)".into(),
        ));
    }
    let mut out: Vec<DeviceClass> = Vec::with_capacity(file.class.len());
    for (i, raw) in file.class.into_iter().enumerate() {
        let class = DeviceClass {
            name: raw.name.trim().to_string(),
            access_latency_us: raw.latency_us,
            seq_bandwidth_mb_s: raw.bandwidth_mb_s,
        };
        class
            .validate()
            .map_err(|e| fail(format!("[[class]] #{}: {e}", i + 1)))?;
        if out.iter().any(|c| c.name.eq_ignore_ascii_case(&class.name)) {
            return Err(fail(format!(
                "[[class]] #{}: name {:?} is defined twice",
                i + 1,
                class.name
            )));
        }
        out.push(class);
    }
    Ok(out)
}

/// A TOML error as one line: `line L, column C (`source line`): message`.
fn one_line(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim().replace('\n', "; ");
    let Some(span) = e.span() else {
        return msg;
    };
    let before = text.get(..span.start).unwrap_or(text);
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line_no = before.matches('\n').count() + 1;
    let column = before[line_start..].chars().count() + 1;
    let source = text[line_start..].lines().next().unwrap_or("").trim();
    if source.is_empty() || source.chars().count() > 80 {
        format!("line {line_no}, column {column}: {msg}")
    } else {
        format!("line {line_no}, column {column} (`{source}`): {msg}")
    }
}

/// Reads custom classes from a TOML file (see [`parse_classes`]).
pub fn load_classes(path: impl AsRef<Path>) -> Result<Vec<DeviceClass>> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(format!("reading device classes {}", path.display()), e))?;
    parse_classes(&text, &path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1e-300)
    }

    #[test]
    fn builtins_equal_table1() {
        let b = DeviceClass::builtins();
        assert_eq!(b.len(), TABLE1_LATENCY_US.len());
        for (class, (paper_name, lat)) in b.iter().zip(TABLE1_LATENCY_US) {
            assert_eq!(class.access_latency_us, lat, "{paper_name}");
            assert_eq!(DeviceClass::by_name(paper_name).as_ref(), Some(class));
        }
        assert_eq!(DeviceClass::hdd().access_latency_us, 11494.0);
        assert_eq!(DeviceClass::ssd().access_latency_us, 141.0);
        assert_eq!(DeviceClass::optane().access_latency_us, 25.0);
        assert_eq!(DeviceClass::pm().access_latency_us, 0.80);
        assert_eq!(DeviceClass::dram().access_latency_us, 0.13);
        let bw: Vec<f64> = b.iter().map(|c| c.seq_bandwidth_mb_s).collect();
        assert_eq!(bw, [150.0, 500.0, 2000.0, 6000.0, 20000.0]);
    }

    #[test]
    fn by_name_is_case_insensitive() {
        for (n, want) in [
            ("hdd", "HDD"),
            ("Ssd", "SSD"),
            ("OPTANE", "Optane"),
            ("optane-ssd", "Optane"),
            ("Optane SSD", "Optane"),
            (" pm ", "PM"),
            ("pmem", "PM"),
            ("dram", "DRAM"),
        ] {
            assert_eq!(DeviceClass::by_name(n).unwrap().name, want, "{n}");
        }
        assert!(DeviceClass::by_name("floppy").is_none());
        assert!(DeviceClass::by_name("").is_none());
    }

    #[test]
    fn io_arithmetic() {
        // HDD, one 4096-byte page: 11494 us + 4096 B / 150e6 B/s.
        let hdd = DeviceClass::hdd();
        assert!(close(hdd.io_seconds(4096), 0.011494 + 4096.0 / 150e6));
        assert!(close(hdd.io_seconds(4096), 0.011_521_306_666_666_667));
        // Optane, 10 accesses of 1 MB (10^6 B) each: 10 * 25 us + 10 MB / 2000 MB/s.
        let o = DeviceClass::optane();
        assert!(close(o.seconds(10, 10_000_000), 0.000_25 + 0.005));
        // Zero bytes is pure latency.
        assert!(close(DeviceClass::dram().io_seconds(0), 0.13e-6));
        assert_eq!(DeviceClass::pm().seconds(0, 0), 0.0);
    }

    #[test]
    fn new_validates() {
        assert!(DeviceClass::new("x", 1.0, 1.0).is_ok());
        for (n, l, b) in [
            ("", 1.0, 1.0),
            ("x", 0.0, 1.0),
            ("x", -1.0, 1.0),
            ("x", f64::NAN, 1.0),
            ("x", 1.0, 0.0),
            ("x", 1.0, f64::INFINITY),
        ] {
            assert!(DeviceClass::new(n, l, b).is_err(), "{n:?} {l} {b}");
        }
    }

    #[test]
    fn toml_classes() {
        let text = r#"
            # index on NVMe, containers on a RAID of disks
            [[class]]
            name = "nvme"
            latency_us = 80
            bandwidth_mb_s = 3000.5

            [[class]]
            name = "raid6"
            latency_us = 9000.0
            bandwidth_mb_s = 800
        "#;
        let c = parse_classes(text, "<test>").unwrap();
        assert_eq!(
            c,
            vec![
                DeviceClass::new("nvme", 80.0, 3000.5).unwrap(),
                DeviceClass::new("raid6", 9000.0, 800.0).unwrap(),
            ]
        );
        assert_eq!(find_class("NVMe", &c).unwrap().name, "nvme");
        assert_eq!(find_class("hdd", &c).unwrap(), DeviceClass::hdd());
        assert!(find_class("tape", &c).is_none());
        // A custom class shadows a built-in of the same name.
        let shadow = parse_classes(
            "[[class]]\nname = \"HDD\"\nlatency_us = 5000\nbandwidth_mb_s = 250\n",
            "<s>",
        )
        .unwrap();
        assert_eq!(
            find_class("hdd", &shadow).unwrap().access_latency_us,
            5000.0
        );
    }

    #[test]
    fn toml_errors() {
        let cases: &[(&str, &str)] = &[
            (
                "[[class]\nname = 1",
                "line 1, column 9 (`[[class]`): unclosed",
            ),
            ("", "no [[class]] entries"),
            (
                "[[class]]\nname = \"a\"\nlatency_us = 1\n",
                "bandwidth_mb_s",
            ),
            (
                "[[class]]\nname = \"a\"\nlatency_us = 1\nbandwidth_mb_s = 1\nlatency = 2\n",
                "line 5, column 1 (`latency = 2`): unknown field `latency`",
            ),
            (
                "[[class]]\nname = \"a\"\nlatency_us = 0\nbandwidth_mb_s = 1\n",
                "#1: device class \"a\": latency_us must be a positive",
            ),
            (
                "[[class]]\nname = \"a\"\nlatency_us = 1\nbandwidth_mb_s = -5\n",
                "bandwidth_mb_s must be a positive",
            ),
            (
                "[[class]]\nname = \"a\"\nlatency_us = nan\nbandwidth_mb_s = 1\n",
                "latency_us must be a positive finite",
            ),
            (
                "[[class]]\nname = \" \"\nlatency_us = 1\nbandwidth_mb_s = 1\n",
                "name is empty",
            ),
            (
                "[[class]]\nname = \"a\"\nlatency_us = \"fast\"\nbandwidth_mb_s = 1\n",
                "latency_us",
            ),
            (
                "[[class]]\nname = \"a\"\nlatency_us = 1\nbandwidth_mb_s = 1\n\
                 [[class]]\nname = \"A\"\nlatency_us = 2\nbandwidth_mb_s = 2\n",
                "#2: name \"A\" is defined twice",
            ),
            ("[device]\nname = \"a\"\n", "device"),
        ];
        for (text, want) in cases {
            let err = parse_classes(text, "<e>").unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, Error::InvalidInput(_)), "{text:?}: {msg}");
            assert!(msg.starts_with("device classes <e>: "), "{msg}");
            assert!(msg.contains(want), "{text:?}: {msg:?} lacks {want:?}");
            assert!(!msg.contains('\n'), "not one line: {msg:?}");
        }
    }

    #[test]
    fn load_from_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("classes.toml");
        std::fs::write(
            &path,
            "[[class]]\nname = \"zns\"\nlatency_us = 60\nbandwidth_mb_s = 1000\n",
        )
        .unwrap();
        let c = load_classes(&path).unwrap();
        assert_eq!(c, vec![DeviceClass::new("zns", 60.0, 1000.0).unwrap()]);

        let missing = dir.path().join("nope.toml");
        let err = load_classes(&missing).unwrap_err();
        assert!(err.is_not_found(), "{err}");
        assert!(err.to_string().contains("nope.toml"), "{err}");

        std::fs::write(&path, "[[class]]\nname = \"zns\"\n").unwrap();
        let err = load_classes(&path).unwrap_err().to_string();
        assert!(
            err.contains("classes.toml") && err.contains("latency_us"),
            "{err}"
        );
    }
}
