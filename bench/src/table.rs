//! A plain text table with aligned columns, printed to stdout (or as JSON rows).

/// Rows of cells under a header; numbers are right-aligned, text left-aligned.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table with these column names.
    pub fn new(header: &[&str]) -> Table {
        Table { header: header.iter().map(|h| h.to_string()).collect(), rows: Vec::new() }
    }

    /// Appends a row (one cell per column).
    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.header.len());
        self.rows.push(cells);
    }

    /// The rows as JSON objects keyed by the header, numbers left as the table prints them.
    pub fn to_json(&self) -> serde_json::Value {
        let rows = self.rows.iter().map(|row| {
            let cells = self.header.iter().zip(row).map(|(h, c)| (h.clone(), serde_json::Value::from(c.as_str())));
            serde_json::Value::Object(cells.collect())
        });
        serde_json::Value::Array(rows.collect())
    }

    /// The table as text: header, rule, rows.
    pub fn render(&self) -> String {
        let widths: Vec<usize> = (0..self.header.len())
            .map(|c| self.rows.iter().map(|r| r[c].len()).chain([self.header[c].len()]).max().unwrap_or(0))
            .collect();
        let numeric = |cell: &str| cell.starts_with(|ch: char| ch.is_ascii_digit());
        let line = |cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .enumerate()
                .map(
                    |(c, (cell, &w))| {
                        if c > 0 && numeric(cell) { format!("{cell:>w$}") } else { format!("{cell:<w$}") }
                    },
                )
                .collect();
            padded.join("  ").trim_end().to_string()
        };
        let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
        let mut out = vec![line(&self.header), rule.join("  ")];
        out.extend(self.rows.iter().map(|r| line(r)));
        out.join("\n")
    }
}
