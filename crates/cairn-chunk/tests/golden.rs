//! Golden cut points: FastCDC, Rabin and regression chunking of one fixed
//! input, pinned as literal numbers.
//!
//! A chunker's cut points are part of the repository format in effect: a
//! chunker that cuts elsewhere after an upgrade stores every file again and
//! deduplicates nothing against older backups. The input is generated here
//! (never from shared test helpers, which may change): 768 KiB of a seeded
//! splitmix64 stream, where the content-defined cuts fall, then 256 KiB of
//! one repeated 7-byte pattern, where no boundary matches and the maximum
//! size (and regression chunking's fallback) decides. Each chunker is
//! pinned with its default sizes (2 KiB min, 8 KiB average, 64 KiB max),
//! unseeded and seeded (encrypted repositories seed the Gear table and the
//! Rabin polynomial).
//!
//! If one of these tests fails, a change moved cut points: that breaks
//! deduplication against existing repositories and is a format change, not
//! a test to update.

use cairn_chunk::{cut_points, ChunkerSpec};
use cairn_core::ChunkerConfig;

const MIN: u32 = 2 * 1024;
const AVG: u32 = 8 * 1024;
const MAX: u32 = 64 * 1024;
/// The maximum of the regression-chunking case (see [`regression`]).
const REGRESSION_MAX: u32 = 12 * 1024;

/// The seed of encrypted repositories' chunkers in these tests.
const CHUNKER_SEED: [u8; 32] = [0x5a; 32];

/// 1 MiB: 768 KiB of splitmix64 output (seed 2026), then a repeated pattern.
fn golden_input() -> Vec<u8> {
    const RANDOM_LEN: usize = 768 * 1024;
    const TOTAL_LEN: usize = 1024 * 1024;
    let mut state: u64 = 2026;
    let mut data = Vec::with_capacity(TOTAL_LEN);
    while data.len() < RANDOM_LEN {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        data.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    let pattern = b"cairn\x00\x01";
    while data.len() < TOTAL_LEN {
        data.push(pattern[data.len() % pattern.len()]);
    }
    data
}

fn cuts(cfg: ChunkerConfig, seed: Option<&[u8; 32]>) -> Vec<usize> {
    let spec = ChunkerSpec::new(&cfg, seed).expect("valid chunker config");
    let mut chunker = spec.build();
    let mut out = Vec::new();
    cut_points(chunker.as_mut(), &golden_input(), &mut out);
    out
}

fn fastcdc() -> ChunkerConfig {
    ChunkerConfig::FastCdc {
        min: MIN,
        avg: AVG,
        max: MAX,
    }
}

fn rabin() -> ChunkerConfig {
    ChunkerConfig::Rabin {
        min: MIN,
        avg: AVG,
        max: MAX,
    }
}

/// Regression chunking with a maximum close to the average, so that many
/// chunks reach it and take the fallback cut the algorithm is about (with
/// the default maximum it cuts this input exactly where Rabin does).
fn regression() -> ChunkerConfig {
    ChunkerConfig::Regression {
        min: MIN,
        avg: AVG,
        max: REGRESSION_MAX,
    }
}

fn rabin_at_regression_sizes() -> ChunkerConfig {
    ChunkerConfig::Rabin {
        min: MIN,
        avg: AVG,
        max: REGRESSION_MAX,
    }
}

/// Runs one chunker over the input and compares every cut point.
fn assert_cuts(what: &str, cfg: ChunkerConfig, seed: Option<&[u8; 32]>, expected: &[usize]) {
    let got = cuts(cfg, seed);
    let first_difference = got.iter().zip(expected).position(|(a, b)| a != b);
    assert!(
        got == expected,
        "{what}: cut points moved (a format change: it breaks deduplication against \
         existing repositories): {} cuts, {} pinned, first difference at cut {:?}",
        got.len(),
        expected.len(),
        first_difference
    );
}

#[test]
fn fastcdc_cut_points_are_pinned() {
    assert_cuts("fastcdc", fastcdc(), None, FASTCDC);
    assert_cuts(
        "seeded fastcdc",
        fastcdc(),
        Some(&CHUNKER_SEED),
        FASTCDC_SEEDED,
    );
}

#[test]
fn rabin_cut_points_are_pinned() {
    assert_cuts("rabin", rabin(), None, RABIN);
    assert_cuts("seeded rabin", rabin(), Some(&CHUNKER_SEED), RABIN_SEEDED);
}

#[test]
fn regression_cut_points_are_pinned() {
    assert_cuts("regression", regression(), None, REGRESSION);
    assert_cuts(
        "seeded regression",
        regression(),
        Some(&CHUNKER_SEED),
        REGRESSION_SEEDED,
    );
    // The fallback cuts are exercised: Rabin with the same sizes cuts
    // elsewhere.
    assert_ne!(cuts(rabin_at_regression_sizes(), None), REGRESSION);
    assert_ne!(
        cuts(rabin_at_regression_sizes(), Some(&CHUNKER_SEED)),
        REGRESSION_SEEDED
    );
}

const FASTCDC: &[usize] = &[
    11546, 23349, 32798, 38530, 54272, 65758, 80323, 89538, 97976, 107487, 116216, 123814, 133072,
    141668, 152142, 154791, 162384, 170777, 181730, 192223, 195254, 204581, 213476, 222111, 230376,
    239883, 248980, 258494, 265664, 274833, 290280, 293517, 303275, 312851, 322852, 326528, 335412,
    345038, 353928, 366654, 374555, 382912, 392707, 401555, 410416, 418890, 430562, 444521, 451227,
    459566, 462370, 471361, 479605, 490426, 502388, 510265, 519070, 524821, 533335, 541748, 551455,
    562875, 574208, 583539, 597474, 607013, 614776, 625986, 634197, 643923, 647614, 658369, 670912,
    680640, 690230, 701450, 711776, 721566, 730670, 739137, 747872, 764557, 773175, 782837, 848373,
    913909, 979445, 1044981, 1048576,
];

const FASTCDC_SEEDED: &[usize] = &[
    14055, 22582, 31143, 40811, 50228, 57258, 66858, 74645, 84296, 93775, 103925, 114137, 122474,
    136596, 144201, 154567, 163056, 173597, 183904, 192125, 200535, 205324, 217255, 227795, 237208,
    246206, 254666, 263376, 271748, 283405, 292288, 300686, 303832, 312821, 323582, 333047, 336084,
    346488, 361655, 370848, 379194, 385646, 395547, 405511, 414880, 424294, 433096, 441479, 452109,
    459089, 468360, 473527, 483239, 494694, 498401, 507423, 517566, 523309, 534295, 542966, 551235,
    559566, 568363, 573038, 584672, 591116, 601602, 611137, 619309, 625597, 634566, 640640, 648868,
    658858, 665374, 673709, 683723, 692134, 700439, 709181, 717387, 727816, 737873, 750135, 760066,
    767271, 770267, 781787, 847323, 912859, 978395, 1043931, 1048576,
];

const RABIN: &[usize] = &[
    3492, 6644, 21210, 40836, 43629, 74265, 80889, 84563, 86820, 129026, 131777, 134478, 138608,
    144845, 159051, 163994, 169288, 171873, 184685, 195442, 201707, 208530, 224915, 234303, 243062,
    262649, 266327, 268723, 277026, 288987, 302328, 306643, 327637, 337410, 344613, 353853, 358523,
    365887, 379278, 382311, 405996, 408627, 416233, 425963, 436792, 443187, 454413, 474006, 479863,
    492768, 500312, 507397, 519484, 528519, 534606, 549530, 553764, 562647, 569824, 598394, 606362,
    610622, 619874, 630417, 640819, 644403, 655127, 663537, 670635, 683028, 696092, 712642, 724444,
    730924, 736251, 742339, 752094, 772316, 776708, 785796, 851332, 916868, 982404, 1047940,
    1048576,
];

const RABIN_SEEDED: &[usize] = &[
    2328, 13185, 20473, 29735, 39182, 54247, 64069, 66283, 76192, 85229, 96150, 99905, 103033,
    112913, 145751, 152915, 158214, 166548, 172689, 180990, 183217, 194903, 199236, 206625, 221132,
    226094, 234437, 253463, 261190, 271581, 286486, 296039, 301468, 318174, 328044, 331020, 338832,
    342584, 348018, 353268, 364626, 371279, 392267, 406740, 409722, 415440, 455573, 460460, 472901,
    485957, 494629, 497597, 509471, 515415, 528526, 532468, 537919, 560155, 570464, 574091, 592522,
    604726, 622869, 626001, 633012, 640591, 653820, 661593, 668300, 681739, 683829, 690578, 695733,
    704738, 708890, 715682, 719058, 723524, 730030, 734890, 760722, 775358, 786075, 851611, 917147,
    982683, 1048219, 1048576,
];

const REGRESSION: &[usize] = &[
    3492, 6644, 18105, 21210, 28278, 39411, 43629, 55859, 66467, 74265, 80889, 84563, 86820, 90464,
    98176, 108172, 120047, 129026, 131777, 134478, 138608, 144845, 155695, 159051, 163994, 169288,
    171873, 180602, 184685, 195442, 201707, 208530, 214665, 224915, 234303, 243062, 248327, 258395,
    262649, 266327, 268723, 277026, 288987, 294361, 302328, 306643, 317016, 327637, 337410, 344613,
    353853, 358523, 365887, 375761, 379278, 382311, 387569, 399606, 405996, 408627, 416233, 425963,
    436792, 443187, 454413, 465583, 474006, 479863, 484600, 492768, 500312, 507397, 519484, 528519,
    534606, 540773, 549530, 553764, 562647, 569824, 573722, 585239, 596850, 606362, 610622, 619874,
    630417, 640819, 644403, 655127, 663537, 670635, 680926, 683028, 692896, 696092, 702121, 712642,
    724444, 730924, 736251, 742339, 752094, 760571, 772316, 776708, 785796, 798084, 810372, 822660,
    834948, 847236, 859524, 871812, 884100, 896388, 908676, 920964, 933252, 945540, 957828, 970116,
    982404, 994692, 1006980, 1019268, 1031556, 1043844, 1048576,
];

const REGRESSION_SEEDED: &[usize] = &[
    2328, 13185, 20473, 29735, 39182, 48776, 54247, 64069, 66283, 76192, 85229, 96150, 99905,
    103033, 112913, 121489, 133169, 138730, 145751, 152915, 158214, 166548, 172689, 180990, 183217,
    194903, 199236, 206625, 214681, 221132, 226094, 234437, 237941, 242861, 253463, 261190, 271581,
    281030, 286486, 296039, 301468, 309376, 318174, 328044, 331020, 338832, 342584, 348018, 353268,
    364626, 371279, 380075, 392267, 402325, 406740, 409722, 415440, 422943, 430980, 441862, 451939,
    455573, 460460, 470880, 477649, 485957, 494629, 497597, 509471, 515415, 526460, 528526, 532468,
    537919, 549671, 560155, 570464, 574091, 585367, 592522, 604726, 613462, 622869, 626001, 633012,
    640591, 648730, 653820, 661593, 668300, 675402, 681739, 683829, 690578, 695733, 704738, 708890,
    715682, 719058, 723524, 730030, 734890, 738764, 748616, 760722, 769897, 775358, 786075, 798363,
    810651, 822939, 835227, 847515, 859803, 872091, 884379, 896667, 908955, 921243, 933531, 945819,
    958107, 970395, 982683, 994971, 1007259, 1019547, 1031835, 1044123, 1048576,
];
