//! CSV and fixed-width text tables of experiment rows (JSON objects), for the
//! experiments whose columns are a plain list of row keys.

use serde_json::Value;

/// `v[k]` as a `u64` (0 when missing).
pub(crate) fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or(0)
}

/// `v[k]` as an `f64` (0 when missing).
pub(crate) fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or(0.0)
}

/// `v[k]` as a string (empty when missing).
pub(crate) fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or("")
}

/// A cell as text: strings bare, floats with `decimals` digits, the rest as JSON.
fn cell(v: &Value, decimals: usize) -> String {
    match v {
        Value::String(x) => x.clone(),
        Value::Number(n) if n.is_f64() => format!("{:.*}", decimals, n.as_f64().unwrap_or(0.0)),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `columns` as a header line, then one line per row.
pub(crate) fn csv(rows: &[Value], columns: &[&str]) -> String {
    let mut out = columns.join(",");
    out.push('\n');
    for r in rows {
        let cells: Vec<String> = columns.iter().map(|c| cell(&r[*c], 6)).collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

/// `title`, then the rows aligned under `(key, header)` columns: text left,
/// numbers right, floats with `decimals` digits.
pub(crate) fn text(
    title: &str,
    rows: &[Value],
    columns: &[(&str, &str)],
    decimals: usize,
) -> String {
    let mut lines: Vec<Vec<String>> = vec![columns.iter().map(|(_, h)| h.to_string()).collect()];
    for r in rows {
        lines.push(
            columns
                .iter()
                .map(|(k, _)| cell(&r[*k], decimals))
                .collect(),
        );
    }
    let left = columns
        .iter()
        .take_while(|(k, _)| rows.first().is_none_or(|r| r[*k].is_string()))
        .count();
    align(title, &lines, left)
}

/// `title`, then `lines` (the first one the header) in columns two spaces
/// apart: the first `left` columns left-aligned, the rest right-aligned.
pub(crate) fn align(title: &str, lines: &[Vec<String>], left: usize) -> String {
    let columns = lines.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|i| lines.iter().map(|l| l[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = format!("{title}\n");
    for l in lines {
        let cells: Vec<String> = l
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i < left {
                    format!("{c:<w$}", w = widths[i])
                } else {
                    format!("{c:>w$}", w = widths[i])
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn csv_and_text() {
        let rows = vec![
            json!({"device": "HDD", "n": 3, "t": 1.5}),
            json!({"device": "PM", "n": 12, "t": 0.25}),
        ];
        assert_eq!(
            super::csv(&rows, &["device", "n", "t"]),
            "device,n,t\nHDD,3,1.500000\nPM,12,0.250000\n"
        );
        let t = super::text(
            "T",
            &rows,
            &[("device", "dev"), ("n", "count"), ("t", "s")],
            2,
        );
        assert_eq!(
            t,
            "T\ndev  count     s\nHDD      3  1.50\nPM      12  0.25\n"
        );
    }
}
