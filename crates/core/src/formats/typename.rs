//! ClickHouse type names taken apart: `Name(args)`, a type's arguments, and a tuple's elements
//! with their names, for the binary formats' own parsers of types.

use crate::schema::MAX_TYPE_DEPTH;

/// How many levels a type name may nest, wrappers included: each level of arrays, tuples and
/// maps a column may have can be wrapped in `Nullable` and `LowCardinality`. A deeper name is
/// refused, so a hostile name cannot exhaust the stack.
pub(crate) const MAX_NAME_DEPTH: usize = 3 * (MAX_TYPE_DEPTH + 1);

/// `Name(args)` to `args`.
pub(crate) fn wrapped<'a>(name: &'a str, wrapper: &str) -> Option<&'a str> {
    name.strip_prefix(wrapper)?
        .trim_start()
        .strip_prefix('(')?
        .strip_suffix(')')
}

/// Splits a type's arguments at the commas outside parentheses, quotes and backquotes.
pub(crate) fn split_args(args: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start, mut quote, mut escaped) = (0_usize, 0, None, false);
    for (i, c) in args.char_indices() {
        if let Some(q) = quote {
            match (escaped, c) {
                (false, '\\') => escaped = true,
                (false, c) if c == q => quote = None,
                _ => escaped = false,
            }
            continue;
        }
        match c {
            '\'' | '`' => quote = Some(c),
            '(' => depth += 1,
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| format!("unbalanced parentheses in '{args}'"))?;
            }
            ',' if depth == 0 => {
                parts.push(&args[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if quote.is_some() || depth != 0 {
        return Err(format!("unbalanced quotes or parentheses in '{args}'"));
    }
    parts.push(&args[start..]);
    if parts.iter().any(|p| p.trim().is_empty()) {
        return Err(format!("an empty argument in '{args}'"));
    }
    Ok(parts)
}

/// A tuple element's name, when it has one, and its type: `a UInt8`, `` `a b` String ``
/// (backslash escapes inside the backquotes) or just `UInt8`.
pub(crate) fn tuple_element(element: &str) -> Result<(Option<String>, &str), String> {
    let element = element.trim();
    if let Some(quoted) = element.strip_prefix('`') {
        let mut name = String::new();
        let mut chars = quoted.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => name.extend(chars.next().map(|(_, c)| c)),
                '`' => return Ok((Some(name), quoted[i + 1..].trim())),
                c => name.push(c),
            }
        }
        return Err(format!(
            "'{element}': a backquoted name has no closing backquote"
        ));
    }
    let paren = element.find('(').unwrap_or(element.len());
    Ok(match element.find(char::is_whitespace) {
        Some(space) if space < paren => {
            (Some(element[..space].to_owned()), element[space..].trim())
        }
        _ => (None, element),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuple_elements_with_and_without_names() {
        assert_eq!(tuple_element(" UInt8 "), Ok((None, "UInt8")));
        assert_eq!(
            tuple_element("DateTime64(3, 'UTC')"),
            Ok((None, "DateTime64(3, 'UTC')"))
        );
        assert_eq!(
            tuple_element("code Nullable(Int32)"),
            Ok((Some("code".into()), "Nullable(Int32)"))
        );
        assert_eq!(
            tuple_element("`a\\`b, c` Array(String)"),
            Ok((Some("a`b, c".into()), "Array(String)"))
        );
        assert!(tuple_element("`open String").is_err());
        assert_eq!(
            split_args("`a, b` String, `c)` Map(String, UInt8), Enum8('x,' = 1)"),
            Ok(vec![
                "`a, b` String",
                " `c)` Map(String, UInt8)",
                " Enum8('x,' = 1)"
            ])
        );
    }
}
