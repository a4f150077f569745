//! Units and number formats shared by every layer: bytes to MiB, a byte count
//! with its binary-prefixed size, and scientific notation as Python prints it.
//! Pure functions, imported by the cores and the exporters alike.

/// Formats a byte count with its binary-prefixed size: "4194304 (4.0 MiB)".
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{n} ({value:.1} {})", UNITS[unit])
    }
}

/// A byte count in its binary-prefixed size alone: "4.0 MiB", "512 B", "48 KiB"
/// (no decimal when whole).
pub fn size(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Bytes to MiB (1 MiB = 1024 x 1024 bytes), as the reference lab reports.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Scientific notation as Python prints `f"{x:.3e}"`: "3.403e+38", "9.766e-04".
pub fn sci(x: f64, digits: usize) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    let s = format!("{x:.digits$e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_short() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(48 << 10), "48 KiB");
        assert_eq!(size(1200 << 20), "1.2 GiB");
        assert_eq!(size(3 << 19), "1.5 MiB");
    }

    #[test]
    fn byte_formatting() {
        assert_eq!(bytes(12), "12 B");
        assert_eq!(bytes(4_194_304), "4194304 (4.0 MiB)");
        assert_eq!(mib(201_326_592), 192.0);
    }

    #[test]
    fn sci_formats_like_python() {
        assert_eq!(sci(65504.0, 3), "6.550e+04");
        assert_eq!(sci(1.0, 1), "1.0e+00");
        assert_eq!(sci(f64::INFINITY, 3), "inf");
    }
}
