//! Errors as the console may show them: a password or token in a URL or a connection string
//! masked, and the text cut to a readable length. A store's error can quote its connection
//! string, and the console never shows a secret.

/// The longest error text shown: a store's message can quote a whole statement.
const MAX_ERROR_CHARS: usize = 400;

/// An error as the page may show it: credentials in a URL or a connection string masked, and
/// cut to a readable length.
pub(crate) fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_ERROR_CHARS));
    let mut rest = text;
    // `scheme://user:password@host`: the password goes.
    while let Some(start) = rest.find("://") {
        let (head, tail) = rest.split_at(start + 3);
        out.push_str(head);
        let authority_end = tail
            .find(|c: char| c == '/' || c.is_whitespace())
            .unwrap_or(tail.len());
        let authority = &tail[..authority_end];
        match (authority.rfind('@'), authority.find(':')) {
            (Some(at), Some(colon)) if colon < at => {
                out.push_str(&authority[..=colon]);
                out.push_str("***");
                out.push_str(&authority[at..]);
            }
            _ => out.push_str(authority),
        }
        rest = &tail[authority_end..];
    }
    out.push_str(rest);
    let masked = mask_keyword(&out, "password=");
    let masked = mask_keyword(&masked, "token=");
    if masked.chars().count() > MAX_ERROR_CHARS {
        let cut: String = masked.chars().take(MAX_ERROR_CHARS).collect();
        return format!("{cut}…");
    }
    masked
}

/// `key=value` with the value masked, wherever `key` appears, in any case.
fn mask_keyword(text: &str, key: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while let Some(found) = lower[at..].find(key) {
        let value_start = at + found + key.len();
        out.push_str(&text[at..value_start]);
        let value_end = text[value_start..]
            .find(|c: char| c.is_whitespace() || "&;,'\")".contains(c))
            .map_or(text.len(), |i| value_start + i);
        if value_end > value_start {
            out.push_str("***");
        }
        at = value_end;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_and_tokens_are_masked_and_long_errors_cut() {
        assert_eq!(
            redact("cannot reach postgres://sluice:hunter2@db:5432/x"),
            "cannot reach postgres://sluice:***@db:5432/x"
        );
        assert_eq!(
            redact("host=db password=s3cret user=x and token=abc&y=1"),
            "host=db password=*** user=x and token=***&y=1"
        );
        assert_eq!(redact("http://host/path"), "http://host/path");
        assert_eq!(redact("s3://bucket@x"), "s3://bucket@x");
        let long = "e".repeat(MAX_ERROR_CHARS * 2);
        assert_eq!(redact(&long).chars().count(), MAX_ERROR_CHARS + 1);
    }
}
