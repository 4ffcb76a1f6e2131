//! PostgreSQL's binary `numeric`, written from a `decimal` column's value.
//!
//! Binary COPY sends each value in its type's binary form, and tokio-postgres has that form of
//! `numeric` only through `rust_decimal`, whose 96-bit mantissa holds 28 digits: a `decimal`
//! holds 38. So the form is written here, from Arrow's `Decimal128` value (an `i128`) and the
//! column's scale, as PostgreSQL's `numeric_send` writes it:
//!
//! ```text
//! ndigits  i16  how many base-10000 digits follow
//! weight   i16  the power of 10000 of the first digit
//! sign     u16  0x0000 positive, 0x4000 negative
//! dscale   u16  digits shown after the point: the column's scale
//! digits   ndigits x i16, each 0..=9999, most significant first
//! ```
//!
//! The digits are grouped by fours from the decimal point both ways, and leading and trailing
//! zero digits are left out: 12.50 is `[12, 5000]` with weight 0, 0.0001 is `[1]` with weight
//! -1. Zero has no digits and weight 0, whatever its scale.

use bytes::{BufMut, BytesMut};

/// The sign word of a negative value; a positive one has 0.
const NEGATIVE: u16 = 0x4000;

/// Digits a value can take: 39 decimal digits (an `i128`) are at most 11 groups of four
/// once split at the point.
const MAX_GROUPS: usize = 12;

/// Appends `value`, a decimal of scale `scale` (0 to 38), in PostgreSQL's binary `numeric`
/// form.
pub(crate) fn put_numeric(value: i128, scale: u8, out: &mut BytesMut) {
    let magnitude = value.unsigned_abs();
    let unit = 10u128.pow(u32::from(scale));
    let (mut whole, fraction) = (magnitude / unit, magnitude % unit);
    let mut groups = [0u16; MAX_GROUPS];
    let mut len = 0;
    // The whole part's groups, least significant first, then turned around.
    while whole > 0 {
        groups[len] = (whole % 10_000) as u16;
        whole /= 10_000;
        len += 1;
    }
    groups[..len].reverse();
    let mut weight = len as i16 - 1;
    // The fraction's groups, from the point on; the last one is padded with zeros on the right.
    let scale = u32::from(scale);
    for start in (0..scale).step_by(4) {
        let group = match scale.checked_sub(start + 4) {
            Some(below) => (fraction / 10u128.pow(below)) % 10_000,
            None => (fraction % 10u128.pow(scale - start)) * 10u128.pow(start + 4 - scale),
        };
        groups[len] = group as u16;
        len += 1;
    }
    let first = groups[..len].iter().position(|&g| g != 0);
    let last = groups[..len].iter().rposition(|&g| g != 0);
    let digits = match (first, last) {
        (Some(first), Some(last)) => {
            weight -= first as i16;
            &groups[first..=last]
        }
        _ => {
            weight = 0;
            &groups[..0]
        }
    };
    out.put_i16(digits.len() as i16);
    out.put_i16(weight);
    out.put_u16(if value < 0 { NEGATIVE } else { 0 });
    out.put_u16(scale as u16);
    for &digit in digits {
        out.put_u16(digit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `SELECT encode(numeric_send(TEXT::numeric(p, s)), 'hex')` answered on PostgreSQL
    /// 15, for values as Arrow holds them: (unscaled value, scale, hex).
    const FROM_POSTGRES: &[(&str, u8, &str)] = &[
        ("0", 0, "0000000000000000"),
        ("0", 2, "0000000000000002"),
        ("1", 0, "00010000000000000001"),
        ("-1", 0, "00010000400000000001"),
        ("1250", 2, "0002000000000002000c1388"),
        ("-1250", 2, "0002000040000002000c1388"),
        ("10000", 0, "00010001000000000001"),
        ("9999", 0, "0001000000000000270f"),
        ("1", 4, "0001ffff000000040001"),
        ("123456789123", 3, "0004000200000003000109291a8504ce"),
        ("-1", 3, "0001ffff40000003000a"),
        (
            "99999999999999999999999999999999999999",
            0,
            "000a0009000000000063270f270f270f270f270f270f270f270f270f",
        ),
        (
            "-99999999999999999999999999999999999999",
            0,
            "000a0009400000000063270f270f270f270f270f270f270f270f270f",
        ),
        (
            "-12345678901234567890123456789012345678",
            38,
            "000affff4000002604d2162e23340d801ed204d2162e23340d801e78",
        ),
        ("1", 38, "0001fff6000000260064"),
        (
            "99999999999999999999999999999999999999",
            38,
            "000affff00000026270f270f270f270f270f270f270f270f270f26ac",
        ),
        ("12345", 5, "0002ffff0000000504d21388"),
        ("100000000", 0, "00010002000000000001"),
        ("1234567890", 1, "0003000200000001000109291a85"),
        (
            "-12345678901234567890123456789012345678",
            10,
            "000a00064000000a04d2162e23340d801ed204d2162e23340d801e78",
        ),
        ("500", 2, "00010000000000020005"),
    ];

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn numerics_are_what_postgres_sends() {
        for &(value, scale, expected) in FROM_POSTGRES {
            let mut out = BytesMut::new();
            put_numeric(value.parse().unwrap(), scale, &mut out);
            assert_eq!(hex(&out), expected, "{value} at scale {scale}");
        }
    }

    #[test]
    fn the_widest_values_fit() {
        for value in [i128::MAX, i128::MIN + 1, i128::MIN] {
            for scale in [0, 1, 3, 38] {
                let mut out = BytesMut::new();
                put_numeric(value, scale, &mut out);
                let digits = u16::from_be_bytes([out[0], out[1]]) as usize;
                assert_eq!(out.len(), 8 + 2 * digits);
                assert!(digits <= 11, "{value} at {scale}");
            }
        }
    }
}
