//! Bytes to text, with the first byte that is not UTF-8 located at a line
//! and column.

/// The 1-based line and column (in characters) just after `before`, the
/// text preceding a position.
pub fn line_column(before: &str) -> (usize, usize) {
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Where `bytes` stop being UTF-8: the offset of the first bad byte and
/// its line and column, or the text.
pub fn decode(bytes: Vec<u8>) -> Result<String, BadByte> {
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let before = std::str::from_utf8(&bytes[..offset]).expect("valid up to here");
        let (line, column) = line_column(before);
        BadByte {
            offset,
            byte: bytes[offset],
            line,
            column,
        }
    })
}

/// The first byte that is not UTF-8 and where it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadByte {
    /// Its offset.
    pub offset: usize,
    /// The byte.
    pub byte: u8,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_bad_byte_is_located() {
        assert_eq!(decode(b"a = 1\n".to_vec()), Ok("a = 1\n".to_string()));
        let bad = decode(b"a = 1\nb = \"\xc3\xa9\xff\"\n".to_vec()).unwrap_err();
        // `é` is one character of two bytes: the bad byte is column 7.
        assert_eq!(
            (bad.line, bad.column, bad.byte, bad.offset),
            (2, 7, 0xff, 13)
        );
        // A sequence cut short is located at its first byte.
        let cut = decode(b"x\xe2\x82".to_vec()).unwrap_err();
        assert_eq!((cut.line, cut.column, cut.byte), (1, 2, 0xe2));
    }

    #[test]
    fn positions_count_lines_and_characters() {
        assert_eq!(line_column(""), (1, 1));
        assert_eq!(line_column("ab\ncd"), (2, 3));
        assert_eq!(line_column("ab\n"), (2, 1));
    }
}
