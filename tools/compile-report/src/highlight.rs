//! Syntax colouring with CSS classes: code is cut into tokens (comments, strings, numbers, words,
//! FX values) and each token of a kind the stylesheet colours becomes a `<span class=..>`;
//! maud escapes the text. One pass over the text serves the C and CUDA C of output code and the
//! graphs' FX text.

use maud::{Markup, html};

/// What is being coloured.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// C or CUDA C: `//` and `/* */` comments, preprocessor lines.
    C,
    /// An FX graph as the engine prints it: `%values`, `# file:line` comments.
    Graph,
}

/// Words coloured as keywords.
const KEYWORDS: &[&str] = &[
    "if",
    "else",
    "for",
    "while",
    "return",
    "break",
    "continue",
    "const",
    "static",
    "inline",
    "extern",
    "void",
    "float",
    "double",
    "int",
    "long",
    "unsigned",
    "char",
    "bool",
    "int64_t",
    "int32_t",
    "uint32_t",
    "size_t",
    "restrict",
    "__restrict__",
    "__global__",
    "__device__",
    "__shared__",
    "__forceinline__",
    "struct",
    "typedef",
    "float4",
    "graph",
    "def",
    "true",
    "false",
];

/// A token's kind, and the CSS class that colours it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plain,
    Comment,
    Preprocessor,
    String,
    Number,
    Keyword,
    Value,
}

impl Kind {
    fn class(self) -> Option<&'static str> {
        match self {
            Kind::Plain => None,
            Kind::Comment => Some("c"),
            Kind::Preprocessor => Some("p"),
            Kind::String => Some("s"),
            Kind::Number => Some("n"),
            Kind::Keyword => Some("k"),
            Kind::Value => Some("v"),
        }
    }
}

/// `code` as a `<pre>` block with its tokens coloured.
pub fn code_block(code: &str, lang: Lang) -> Markup {
    let tokens = tokens(code, lang);
    html! {
        pre.code { code {
            @for (kind, text) in &tokens {
                @match kind.class() {
                    Some(class) => span class=(class) { (text) },
                    None => (text),
                }
            }
        } }
    }
}

/// The tokens of `code`, in order; their texts joined give `code` back.
fn tokens(code: &str, lang: Lang) -> Vec<(Kind, &str)> {
    let mut out: Vec<(Kind, &str)> = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    let mut plain_start = 0;
    let mut line_start = true;
    while i < bytes.len() {
        let rest = &code[i..];
        let token: Option<(Kind, usize)> = if lang == Lang::C && rest.starts_with("//") {
            Some((Kind::Comment, rest.find('\n').unwrap_or(rest.len())))
        } else if lang == Lang::C && rest.starts_with("/*") {
            Some((Kind::Comment, rest.find("*/").map_or(rest.len(), |e| e + 2)))
        } else if lang == Lang::Graph && rest.starts_with('#') {
            Some((Kind::Comment, rest.find('\n').unwrap_or(rest.len())))
        } else if lang == Lang::C && line_start && rest.trim_start_matches([' ', '\t']).starts_with('#') {
            Some((Kind::Preprocessor, rest.find('\n').unwrap_or(rest.len())))
        } else if let Some(inside) = rest.strip_prefix('"') {
            let end = inside.find('"').map_or(rest.len(), |e| e + 2);
            Some((Kind::String, end))
        } else if bytes[i].is_ascii_digit() && (i == 0 || !is_word(bytes[i - 1])) {
            let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '_')).unwrap_or(rest.len());
            Some((Kind::Number, end))
        } else if lang == Lang::Graph && rest.starts_with('%') {
            let end = 1 + rest[1..].find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len() - 1);
            Some((Kind::Value, end))
        } else if is_word(bytes[i]) && (i == 0 || !is_word(bytes[i - 1])) {
            let end = rest.find(|c: char| !is_word_char(c)).unwrap_or(rest.len());
            KEYWORDS.contains(&&rest[..end]).then_some((Kind::Keyword, end))
        } else {
            None
        };
        match token {
            Some((kind, len)) if len > 0 => {
                if plain_start < i {
                    out.push((Kind::Plain, &code[plain_start..i]));
                }
                out.push((kind, &code[i..i + len]));
                i += len;
                plain_start = i;
                line_start = false;
            }
            _ => {
                let c = rest.chars().next().expect("not at the end");
                if c == '\n' {
                    line_start = true;
                } else if !c.is_whitespace() {
                    line_start = false;
                }
                i += c.len_utf8();
            }
        }
    }
    if plain_start < code.len() {
        out.push((Kind::Plain, &code[plain_start..]));
    }
    out
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_give_the_text_back_and_colour_what_they_should() {
        let c = "#include <math.h>\nvoid k(const float* restrict a, int64_t n) { // sum\n    a[0] = 1.5f; /* x */ }\n";
        let t = tokens(c, Lang::C);
        assert_eq!(t.iter().map(|(_, s)| *s).collect::<String>(), c);
        assert!(t.contains(&(Kind::Preprocessor, "#include <math.h>")));
        assert!(t.contains(&(Kind::Keyword, "restrict")) && t.contains(&(Kind::Number, "1.5f")));
        assert!(t.contains(&(Kind::Comment, "// sum")) && t.contains(&(Kind::Comment, "/* x */")));
        let g = "%add_1: f32[4] = add(%arg0, 2.0)  # models/src/phase5.rs:208\n";
        let t = tokens(g, Lang::Graph);
        assert_eq!(t.iter().map(|(_, s)| *s).collect::<String>(), g);
        assert!(t.contains(&(Kind::Value, "%add_1")) && t.contains(&(Kind::Comment, "# models/src/phase5.rs:208")));
        assert!(!t.contains(&(Kind::Number, "1")), "digits inside a word are not numbers: {:?}", t.len());
    }

    #[test]
    fn markup_is_escaped() {
        let html = code_block("if (a < b && c > d) {}", Lang::C).into_string();
        assert!(html.contains("&lt;") && html.contains("&amp;&amp;") && !html.contains("a < b"), "{html}");
    }
}
