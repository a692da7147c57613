# ISO 8601 order for English: unambiguous for a reader in any English-speaking country (12/01 is
# December in one and January in another), and the order the audit exports and the CSV use.
DATE_FORMAT = SHORT_DATE_FORMAT = "Y-m-d"
DATETIME_FORMAT = SHORT_DATETIME_FORMAT = "Y-m-d H:i T"
TIME_FORMAT = "H:i"
YEAR_MONTH_FORMAT = "Y-m"
MONTH_DAY_FORMAT = "m-d"
