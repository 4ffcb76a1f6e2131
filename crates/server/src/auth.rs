//! Who may write: bearer tokens and ClickHouse-style users, for every table or per table.
//!
//! A request that writes to table T must present a credential of T's own rule when T has one,
//! else of the global rule; with neither, anyone may write (the default, on loopback). Accepted
//! forms, so existing clients work unchanged:
//!
//! - `Authorization: Bearer <token>`
//! - `Authorization: Basic <user:password>` (curl `-u`, most HTTP clients)
//! - `X-ClickHouse-User` / `X-ClickHouse-Key` headers (ClickHouse drivers)
//! - `user=` / `password=` URL parameters (the ClickHouse endpoint only)
//! - the user and password of the native protocol's handshake (its TCP door)
//!
//! Reading endpoints (`/ping`, `/health`, `/metrics`, `/v1/tables`) stay open. The console's
//! JSON (`/v1/dashboard`, `/v1/estimate`) needs a credential that some rule accepts, once any rule
//! is set (`Access::check_read`); its pages are static and open. Secrets are compared in
//! constant time.

use std::collections::HashMap;

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use base64::Engine;
use serde::Deserialize;

use crate::error::{ApiError, Kind};

/// One rule: the tokens and users it accepts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    /// Bearer tokens.
    #[serde(default)]
    pub tokens: Vec<String>,
    /// ClickHouse-style users: name to password.
    #[serde(default)]
    pub users: HashMap<String, String>,
}

impl Credentials {
    /// A rule accepting one bearer token.
    pub fn token(token: impl Into<String>) -> Self {
        Self {
            tokens: vec![token.into()],
            users: HashMap::new(),
        }
    }

    /// Whether the rule accepts nobody (no tokens, no users).
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty() && self.users.is_empty()
    }

    fn accepts(&self, presented: &Presented) -> bool {
        match presented {
            Presented::Token(token) => self.tokens.iter().any(|t| same(t, token)),
            Presented::User { name, password } => self
                .users
                .get(name)
                .is_some_and(|expected| same(expected, password)),
        }
    }
}

/// Every rule: global and per table.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// The rule for tables without their own.
    pub global: Option<Credentials>,
    /// Per-table rules.
    pub tables: HashMap<String, Credentials>,
}

impl Access {
    /// Whether any rule is set (otherwise anyone may write).
    pub fn is_enabled(&self) -> bool {
        self.global.is_some() || !self.tables.is_empty()
    }

    /// Checks that the request may write to `table`. `params` are the URL's parameters where
    /// the endpoint accepts credentials there (ClickHouse's `user` and `password`).
    pub(crate) fn check(
        &self,
        table: &str,
        headers: &HeaderMap,
        params: &[(String, String)],
    ) -> Result<(), ApiError> {
        if self.rule(table).is_none() {
            return Ok(());
        }
        self.check_presented(table, presented(headers, params)?)
    }

    /// Checks that the ClickHouse user `name` with `password` may write to `table`: the native
    /// protocol's credentials, sent once in its handshake.
    pub(crate) fn check_user(
        &self,
        table: &str,
        name: &str,
        password: &str,
    ) -> Result<(), ApiError> {
        let user = Presented::User {
            name: name.to_owned(),
            password: password.to_owned(),
        };
        self.check_presented(table, Some(user))
    }

    /// Checks that the request may read the console: with no rule set anyone may, otherwise it
    /// must present a credential the global rule or some table's rule accepts. The console shows
    /// every table's figures, never a secret, so whoever may write somewhere may look.
    pub(crate) fn check_read(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        if !self.is_enabled() {
            return Ok(());
        }
        let refused = |message: &str| Err(ApiError::new(Kind::Unauthorized, message));
        match presented(headers, &[])? {
            None => refused(
                "the console needs credentials: Authorization: Bearer <token>, basic auth, or \
                 X-ClickHouse-User/X-ClickHouse-Key",
            ),
            Some(credential) => {
                let mut rules = self.global.iter().chain(self.tables.values());
                if rules.any(|rule| rule.accepts(&credential)) {
                    Ok(())
                } else {
                    refused("the credentials sent are not accepted by any rule")
                }
            }
        }
    }

    fn rule(&self, table: &str) -> Option<&Credentials> {
        self.tables.get(table).or(self.global.as_ref())
    }

    fn check_presented(&self, table: &str, presented: Option<Presented>) -> Result<(), ApiError> {
        let Some(rule) = self.rule(table) else {
            return Ok(());
        };
        match presented {
            Some(credential) if rule.accepts(&credential) => Ok(()),
            Some(_) => Err(ApiError::new(
                Kind::Unauthorized,
                format!("the credentials sent are not allowed to write to table '{table}'"),
            )),
            None => Err(ApiError::new(
                Kind::Unauthorized,
                format!(
                    "writing to table '{table}' needs credentials: Authorization: Bearer <token>, \
                     basic auth, or X-ClickHouse-User/X-ClickHouse-Key"
                ),
            )),
        }
    }
}

/// A credential as the client sent it.
#[derive(Debug, PartialEq, Eq)]
enum Presented {
    Token(String),
    User { name: String, password: String },
}

fn presented(
    headers: &HeaderMap,
    params: &[(String, String)],
) -> Result<Option<Presented>, ApiError> {
    let bad = |what: &str| ApiError::new(Kind::Unauthorized, format!("unreadable {what}"));
    if let Some(value) = headers.get(AUTHORIZATION) {
        let value = value.to_str().map_err(|_| bad("Authorization header"))?;
        let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
        if scheme.eq_ignore_ascii_case("bearer") {
            return Ok(Some(Presented::Token(rest.trim().to_owned())));
        }
        if scheme.eq_ignore_ascii_case("basic") {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(rest.trim())
                .map_err(|_| bad("basic credentials"))?;
            let text = String::from_utf8(decoded).map_err(|_| bad("basic credentials"))?;
            let (name, password) = text.split_once(':').unwrap_or((&text, ""));
            return Ok(Some(Presented::User {
                name: name.to_owned(),
                password: password.to_owned(),
            }));
        }
        return Err(ApiError::new(
            Kind::Unauthorized,
            format!("Authorization scheme '{scheme}' is not supported: use Bearer or Basic"),
        ));
    }
    let header = |name: &str| -> Result<Option<String>, ApiError> {
        headers
            .get(name)
            .map(|v| v.to_str().map(str::to_owned).map_err(|_| bad(name)))
            .transpose()
    };
    let param = |name: &str| {
        params
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let name = header("X-ClickHouse-User")?.or_else(|| param("user"));
    let password = header("X-ClickHouse-Key")?.or_else(|| param("password"));
    Ok(match (name, password) {
        (None, None) => None,
        (name, password) => Some(Presented::User {
            name: name.unwrap_or_else(|| "default".to_owned()),
            password: password.unwrap_or_default(),
        }),
    })
}

/// Equal strings, in time that does not depend on where they differ.
fn same(expected: &str, given: &str) -> bool {
    let (a, b) = (expected.as_bytes(), given.as_bytes());
    let mut diff = u8::from(a.len() != b.len());
    for (i, x) in a.iter().enumerate() {
        diff |= x ^ b.get(i).copied().unwrap_or(!x);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn access() -> Access {
        let mut users = HashMap::new();
        users.insert("writer".to_owned(), "s3cret".to_owned());
        Access {
            global: Some(Credentials::token("global-token")),
            tables: HashMap::from([(
                "billing".to_owned(),
                Credentials {
                    tokens: vec!["billing-token".into()],
                    users,
                },
            )]),
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        map
    }

    #[test]
    fn each_table_takes_its_own_rule_or_the_global_one() {
        let access = access();
        let bearer = |t: &str| headers(&[("authorization", &format!("Bearer {t}"))]);
        assert!(access.check("events", &bearer("global-token"), &[]).is_ok());
        assert!(
            access
                .check("events", &bearer("billing-token"), &[])
                .is_err()
        );
        assert!(
            access
                .check("billing", &bearer("billing-token"), &[])
                .is_ok()
        );
        assert!(
            access
                .check("billing", &bearer("global-token"), &[])
                .is_err()
        );
        let missing = access.check("events", &HeaderMap::new(), &[]).unwrap_err();
        assert_eq!(missing.kind, Kind::Unauthorized);
        assert!(
            missing.message.contains("needs credentials"),
            "{}",
            missing.message
        );
        assert!(Access::default().check("x", &HeaderMap::new(), &[]).is_ok());
    }

    #[test]
    fn clickhouse_forms_of_a_user_are_all_read() {
        let access = access();
        let basic = base64::engine::general_purpose::STANDARD.encode("writer:s3cret");
        let forms = [
            headers(&[("authorization", &format!("Basic {basic}"))]),
            headers(&[
                ("x-clickhouse-user", "writer"),
                ("x-clickhouse-key", "s3cret"),
            ]),
        ];
        for form in &forms {
            assert!(access.check("billing", form, &[]).is_ok());
        }
        let params = vec![
            ("user".to_owned(), "writer".to_owned()),
            ("password".to_owned(), "s3cret".to_owned()),
        ];
        assert!(access.check("billing", &HeaderMap::new(), &params).is_ok());
        let wrong = headers(&[
            ("x-clickhouse-user", "writer"),
            ("x-clickhouse-key", "nope"),
        ]);
        assert!(access.check("billing", &wrong, &[]).is_err());
        let odd = headers(&[("authorization", "Digest abc")]);
        assert!(
            access
                .check("billing", &odd, &[])
                .unwrap_err()
                .message
                .contains("Digest")
        );
    }

    #[test]
    fn the_console_takes_any_rules_credential_once_a_rule_is_set() {
        let access = access();
        let bearer = |t: &str| headers(&[("authorization", &format!("Bearer {t}"))]);
        assert!(access.check_read(&bearer("global-token")).is_ok());
        assert!(access.check_read(&bearer("billing-token")).is_ok());
        let basic = base64::engine::general_purpose::STANDARD.encode("writer:s3cret");
        let user = headers(&[("authorization", &format!("Basic {basic}"))]);
        assert!(access.check_read(&user).is_ok());
        let none = access.check_read(&HeaderMap::new()).unwrap_err();
        assert_eq!(none.kind, Kind::Unauthorized);
        assert!(access.check_read(&bearer("nope")).is_err());
        assert!(Access::default().check_read(&HeaderMap::new()).is_ok());
    }

    #[test]
    fn comparison_needs_every_byte() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "ab"));
        assert!(!same("ab", "abc"));
        assert!(!same("", "a"));
        assert!(same("", ""));
    }
}
