//! Text made safe to show on a terminal: the one escaping every message and every
//! quoted briefing or path goes through before it is printed.

use std::borrow::Cow;

/// `text` with every character that a terminal could take as a command shown as an
/// escape instead: C0 controls but the line break and tab (so `\x1b`, `\x07`, `\r`),
/// DEL, the C1 controls (`\u{9b}` starts a sequence on some terminals) and the Unicode
/// bidirectional overrides, which make a terminal show text in another order than it is.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    fn unsafe_char(c: char) -> bool {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    }
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !unsafe_char(c) {
            out.push(c);
        } else if (c as u32) < 0x80 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::terminal_safe;

    #[test]
    fn control_characters_become_visible() {
        assert_eq!(terminal_safe("plain\ttext\nnext"), "plain\ttext\nnext");
        assert_eq!(
            terminal_safe("a\u{1b}]0;pwned\u{7}b\u{1b}[2J\r\u{7f}\u{9b}\u{202e}"),
            "a\\x1b]0;pwned\\x07b\\x1b[2J\\x0d\\x7f\\u{9b}\\u{202e}"
        );
    }
}
