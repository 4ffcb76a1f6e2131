//! What the database sinks check before they write a `decimal` column's values.
//!
//! Arrow's text of a decimal keeps only as many digits as the column's precision: a value with
//! more would lose its leading digits without a word. The doors never make one, but a store
//! must not rely on that, so every decimal column of a flush is checked first.

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::{DataType, Decimal128Type};

/// Checks that every decimal column of `batch` holds only values of its precision; the error
/// names the column.
pub(crate) fn check_decimals(batch: &RecordBatch) -> Result<(), String> {
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        if let DataType::Decimal128(precision, _) = field.data_type() {
            column
                .as_primitive::<Decimal128Type>()
                .validate_decimal_precision(*precision)
                .map_err(|e| format!("column '{}': {e}", field.name()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::Decimal128Array;

    use super::*;

    #[test]
    fn a_decimal_wider_than_its_precision_is_refused() {
        let batch = |values: Vec<Option<i128>>| {
            let array = Decimal128Array::from(values)
                .with_precision_and_scale(4, 2)
                .unwrap();
            RecordBatch::try_from_iter([("d", Arc::new(array) as _)]).unwrap()
        };
        assert_eq!(
            check_decimals(&batch(vec![Some(9999), None, Some(-9999)])),
            Ok(())
        );
        let error = check_decimals(&batch(vec![Some(1), Some(10_000)])).unwrap_err();
        assert!(error.starts_with("column 'd': "), "{error}");
    }
}
