# The Chinese national form (GB/T 7408 reading order, year-month-day with 年月日), one for every name.
DATE_FORMAT = SHORT_DATE_FORMAT = "Y年n月j日"
DATETIME_FORMAT = SHORT_DATETIME_FORMAT = "Y年n月j日 H:i T"
TIME_FORMAT = "H:i"
YEAR_MONTH_FORMAT = "Y年n月"
MONTH_DAY_FORMAT = "n月j日"
