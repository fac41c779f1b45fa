//! Kubernetes quantities (`8Gi`, `500M`, `1.5Gi`, `1e9`, `2048`) read as whole bytes, with
//! the API server's grammar and rounding, so that a size the API server accepts in a
//! resource request means the same number of bytes to every operator.
//!
//! The grammar (`k8s.io/apimachinery/pkg/api/resource`): a signed decimal number (`12`,
//! `1.5`, `.5`, `5.`) followed by one suffix: binary (`Ki` `Mi` `Gi` `Ti` `Pi` `Ei`),
//! decimal (`n` `u` `m` none `k` `M` `G` `T` `P` `E`) or a decimal exponent (`e3`, `E-2`).
//! Like the API server's `Quantity.Value()`, a fraction of a byte rounds up. Arithmetic is
//! exact (integers, no floating point), so `1.1G` is 1 100 000 000 bytes, not 1 099 999 999.

/// Why a text is not a size; the message names the text, for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// Not a Kubernetes quantity at all.
    #[error("{0:?} is not a Kubernetes quantity (a number with an optional suffix such as Ki, Mi, Gi, k, M, G or e3)")]
    Malformed(String),
    /// A quantity, but below zero: no size is negative.
    #[error("{0:?} is negative")]
    Negative(String),
    /// A quantity too large for 64 bits of bytes.
    #[error("{0:?} is too large")]
    TooLarge(String),
}

/// The bytes a quantity stands for, a fraction of a byte rounded up.
pub fn bytes(text: &str) -> Result<u64, QuantityError> {
    let malformed = || QuantityError::Malformed(text.to_owned());
    let too_large = || QuantityError::TooLarge(text.to_owned());
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return Err(malformed());
    }
    // The number as digits × 10^-(fraction length); at most 38 digits fit in a u128.
    let digits = format!("{whole}{fraction}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 38 {
        return Err(too_large());
    }
    let mantissa: u128 = if digits.is_empty() { 0 } else { digits.parse().map_err(|_| malformed())? };
    let scale = i64::try_from(fraction.len()).map_err(|_| too_large())?;
    let (power_of_ten, power_of_two) = match suffix {
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "" => (0, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        exponent if exponent.starts_with(['e', 'E']) => (decimal_exponent(&exponent[1..]).ok_or_else(malformed)?, 0),
        _ => return Err(malformed()),
    };
    if mantissa == 0 {
        return Ok(0);
    }
    if negative {
        return Err(QuantityError::Negative(text.to_owned()));
    }
    let value = mantissa.checked_mul(1u128 << power_of_two).ok_or_else(too_large)?;
    let exponent = power_of_ten - scale;
    let value = if exponent >= 0 {
        let factor = u32::try_from(exponent).ok().and_then(|e| 10u128.checked_pow(e)).ok_or_else(too_large)?;
        value.checked_mul(factor).ok_or_else(too_large)?
    } else {
        // Dividing by more than 10^38 leaves less than one byte of any u128: one byte.
        match u32::try_from(-exponent).ok().and_then(|e| 10u128.checked_pow(e)) {
            Some(divisor) => value.div_ceil(divisor),
            None => 1,
        }
    };
    u64::try_from(value).map_err(|_| too_large())
}

/// The integer after `e` / `E`: optionally signed digits.
fn decimal_exponent(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_and_decimal_suffixes_and_exponents_are_read_exactly() {
        assert_eq!(bytes("1Gi"), Ok(1 << 30));
        assert_eq!(bytes("64Mi"), Ok(64 << 20));
        assert_eq!(bytes("1.5Gi"), Ok(3 << 29));
        assert_eq!(bytes("1.1G"), Ok(1_100_000_000));
        assert_eq!(bytes("500M"), Ok(500_000_000));
        assert_eq!(bytes("2048"), Ok(2048));
        assert_eq!(bytes("1e9"), Ok(1_000_000_000));
        assert_eq!(bytes("1E3"), Ok(1000));
        assert_eq!(bytes("12e-1"), Ok(2));
        assert_eq!(bytes("+5k"), Ok(5000));
        assert_eq!(bytes(".5Ki"), Ok(512));
        assert_eq!(bytes("5."), Ok(5));
        assert_eq!(bytes("8Ei"), Ok(8 << 60));
        assert_eq!(bytes("0"), Ok(0));
        assert_eq!(bytes("-0"), Ok(0));
    }

    #[test]
    fn a_fraction_of_a_byte_rounds_up_as_the_api_server_does() {
        assert_eq!(bytes("1500m"), Ok(2));
        assert_eq!(bytes("1n"), Ok(1));
        assert_eq!(bytes("1e-50"), Ok(1));
        assert_eq!(bytes("0.1"), Ok(1));
    }

    #[test]
    fn what_is_not_a_size_is_refused_with_the_text() {
        for text in ["", "Gi", "1Xi", "1 Gi", " 1Gi", "1.2.3", "1e", "1e+", "1ee3", "1Gi2", "0x10", "."] {
            assert_eq!(bytes(text), Err(QuantityError::Malformed(text.into())), "{text:?}");
        }
        assert_eq!(bytes("-1Gi"), Err(QuantityError::Negative("-1Gi".into())));
        assert_eq!(bytes("16Ei"), Err(QuantityError::TooLarge("16Ei".into())));
        assert_eq!(bytes("1e40"), Err(QuantityError::TooLarge("1e40".into())));
        let message = bytes("1Xi").unwrap_err().to_string();
        assert!(message.contains("\"1Xi\"") && message.contains("Gi"), "{message}");
    }
}
