//! Text from a learner's process, made safe to print: escape sequences and other control
//! characters are shown escaped, never sent to the terminal.

/// `text` with every control character other than newline and tab written as `\u{..}`.
pub fn printable(text: &str) -> String {
    let mut shown = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            shown.extend(c.escape_unicode());
        } else {
            shown.push(c);
        }
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_are_shown_not_sent() {
        assert_eq!(printable("ok\x1b[2J\rdone\n\tnext"), "ok\\u{1b}[2J\\u{d}done\n\tnext");
        assert_eq!(printable("plain ✓"), "plain ✓");
    }
}
