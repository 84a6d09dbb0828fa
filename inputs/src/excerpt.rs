//! Long values kept out of error messages: an error echoes what it
//! rejects, and a 2 MB string echoed whole buries the message.

use std::borrow::Cow;

/// The characters of a value an error echoes before cutting it.
pub const EXCERPT_CHARS: usize = 80;

/// The longest message [`shorten_quoted`] leaves whole, in characters.
pub const MESSAGE_CHARS_MAX: usize = 2000;

/// `value` itself if it has at most [`EXCERPT_CHARS`] characters, else its
/// first [`EXCERPT_CHARS`] characters and `... (N bytes)`.
pub fn shorten(value: &str) -> Cow<'_, str> {
    shorten_to(value, EXCERPT_CHARS)
}

fn shorten_to(value: &str, chars: usize) -> Cow<'_, str> {
    match value.char_indices().nth(chars) {
        None => Cow::Borrowed(value),
        Some((cut, _)) => Cow::Owned(format!("{}... ({} bytes)", &value[..cut], value.len())),
    }
}

/// `message` with each value quoted in it (between backticks, or between
/// double quotes as serde quotes them) [`shorten`]ed, and the whole cut
/// at [`MESSAGE_CHARS_MAX`] characters if it is still longer.
pub fn shorten_quoted(message: &str) -> Cow<'_, str> {
    if message.len() <= EXCERPT_CHARS {
        return Cow::Borrowed(message);
    }
    let mut out = String::with_capacity(message.len().min(4 * MESSAGE_CHARS_MAX));
    let mut rest = message;
    while let Some(open) = rest.find(['`', '"']) {
        let quote = rest.as_bytes()[open] as char;
        out.push_str(&rest[..=open]);
        let inside = &rest[open + 1..];
        let Some(close) = closing(inside, quote) else {
            rest = inside;
            continue;
        };
        out.push_str(&shorten(&inside[..close]));
        out.push(quote);
        rest = &inside[close + 1..];
    }
    out.push_str(rest);
    match shorten_to(&out, MESSAGE_CHARS_MAX) {
        Cow::Borrowed(_) => Cow::Owned(out),
        Cow::Owned(cut) => Cow::Owned(cut),
    }
}

/// The offset of the quote closing a value that starts `text`; inside
/// double quotes a backslash escapes the next character.
fn closing(text: &str, quote: char) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' && quote == '"' {
            escaped = true;
        } else if c == quote {
            return Some(i);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_values_are_left_alone() {
        assert_eq!(shorten("ring"), "ring");
        let eighty = "x".repeat(80);
        assert_eq!(shorten(&eighty), eighty);
        let message = "unknown algorithm `ringg` for allreduce; valid: ring, tree, recursive_doubling, rabenseifner";
        assert_eq!(shorten_quoted(message), message);
    }

    #[test]
    fn a_long_value_keeps_its_start_and_says_its_length() {
        let long = "é".repeat(1000);
        assert_eq!(
            shorten(&long),
            format!("{}... (2000 bytes)", "é".repeat(80))
        );
    }

    #[test]
    fn long_quoted_values_in_a_message_are_shortened() {
        let value = "a".repeat(2_000_000);
        let message = format!("unknown collective `{value}`; valid: allreduce, `broadcast`");
        let short = shorten_quoted(&message);
        assert_eq!(
            short,
            format!(
                "unknown collective `{}... (2000000 bytes)`; valid: allreduce, `broadcast`",
                "a".repeat(80)
            )
        );
        let serde = format!("invalid type: string \"{value}\\\"{value}\", expected an integer");
        let short = shorten_quoted(&serde);
        assert!(short.len() < 200, "{short}");
        assert!(short.ends_with("\", expected an integer"), "{short}");
    }

    #[test]
    fn an_unquoted_long_message_is_cut_whole() {
        let message = format!("bad {}", "b".repeat(10_000));
        let short = shorten_quoted(&message);
        assert!(
            short.ends_with("... (10004 bytes)"),
            "{}",
            &short[short.len() - 40..]
        );
        assert!(short.chars().count() < MESSAGE_CHARS_MAX + 40);
        let unclosed = format!("bad `{}", "c".repeat(10_000));
        assert!(shorten_quoted(&unclosed).len() < MESSAGE_CHARS_MAX + 40);
    }
}
