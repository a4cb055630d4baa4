"""Reading users' tables: type inference, overrides and clear errors for bad input."""

import numpy as np
import pandas as pd
import pytest

from hdgp.exceptions import HDGPWarning
from hdgp.io import TableError, TableSchema, read_table


def _frame(n=12):
    rng = np.random.default_rng(0)
    return pd.DataFrame({
        "id": [f"row{i}" for i in range(n)],
        "x": rng.normal(size=n),
        "code": rng.integers(0, 3, n),
        "colour": rng.choice(["red", "blue"], n),
        "flag": rng.choice([True, False], n),
        "y": rng.normal(size=n),
    })


def test_csv_and_parquet_read_the_same(tmp_path):
    frame = _frame()
    frame.to_csv(tmp_path / "t.csv", index=False)
    frame.to_parquet(tmp_path / "t.parquet", index=False)
    a, b = read_table(tmp_path / "t.csv"), read_table(tmp_path / "t.parquet")
    pd.testing.assert_frame_equal(a, b, check_dtype=False)


def test_a_separator_that_splits_nothing_is_named(tmp_path):
    (tmp_path / "t.csv").write_text("a,b,y\n1,2,3\n")
    with pytest.raises(TableError, match=r"separator '\|' has one column, named 'a,b,y': check --sep"):
        read_table(tmp_path / "t.csv", sep="|")


def test_missing_markers_are_missing_in_csv_and_parquet(tmp_path):
    # a number marker (-999) counts in typed Parquet columns too, as read_csv counts it
    frame = pd.DataFrame({"a": ["1", "?", "3"], "b": [1.0, 2.0, 3.0], "c": ["x", "?", "-"], "d": [4, -999, 5]})
    frame.to_csv(tmp_path / "t.csv", index=False)
    frame.to_parquet(tmp_path / "t.parquet", index=False)
    for name in ("t.csv", "t.parquet"):
        read = read_table(tmp_path / name, na_values=["?", "-", "-999"])
        assert read.isna().sum().tolist() == [1, 0, 2, 1], name
        assert read_table(tmp_path / name).isna().sum().sum() == 0


@pytest.mark.parametrize("content, message", [
    ("", "is empty"),
    ("a,b,y\n", "no data rows"),
])
def test_empty_files(tmp_path, content, message):
    path = tmp_path / "e.csv"
    path.write_text(content)
    with pytest.raises(TableError, match=message):
        read_table(path)


def test_missing_file_and_unknown_extension(tmp_path):
    with pytest.raises(TableError, match="does not exist"):
        read_table(tmp_path / "none.csv")
    (tmp_path / "t.xlsx").write_text("x")
    with pytest.raises(TableError, match=r"\.csv, \.tsv or \.parquet"):
        read_table(tmp_path / "t.xlsx")


def test_repeated_header_and_semicolon_files_are_named(tmp_path):
    (tmp_path / "dup.csv").write_text("a,a,y\n1,2,3\n4,5,6\n")  # pandas alone would rename it a.1
    with pytest.raises(TableError, match=r"duplicated column names \['a'\]"):
        read_table(tmp_path / "dup.csv")
    (tmp_path / "semi.csv").write_text("a;b;y\n1;2;3\n4;5;6\n")
    with pytest.raises(TableError, match="separated by semicolons"):
        read_table(tmp_path / "semi.csv")
    # a ';' file with commas in it: decimal commas make pandas fail, a comma in a name splits the header
    (tmp_path / "decimal.csv").write_text("a;b;y\n1;2;3\n4,5;5,25;6\n")
    with pytest.raises(TableError, match="looks separated by semicolons: give --sep ';'"):
        read_table(tmp_path / "decimal.csv")
    (tmp_path / "names.csv").write_text("price;weight,kg;y\n1;2;3\n4;5;6\n")
    with pytest.raises(TableError, match=r"semicolons \(with commas in its names or cells\). Give --sep ';'"):
        read_table(tmp_path / "names.csv")
    assert read_table(tmp_path / "names.csv", sep=";").columns.tolist() == ["price", "weight,kg", "y"]
    (tmp_path / "one.csv").write_text("a;b,c,y\n1,2,3\n4,5,6\n")  # a semicolon inside one comma-separated name
    assert read_table(tmp_path / "one.csv").columns.tolist() == ["a;b", "c", "y"]
    (tmp_path / "spaces.txt").write_text("a b y\n1 2 3\n4 5 6\n")
    with pytest.raises(TableError, match="separated by spaces or tabs"):
        read_table(tmp_path / "spaces.txt")


def test_compressed_csv_reads_like_the_plain_file(tmp_path):
    frame = _frame()
    frame.to_csv(tmp_path / "t.csv", index=False)
    frame.to_csv(tmp_path / "t.csv.gz", index=False)
    pd.testing.assert_frame_equal(read_table(tmp_path / "t.csv.gz"), read_table(tmp_path / "t.csv"))
    (tmp_path / "t.xlsx.gz").write_bytes(b"x")
    with pytest.raises(TableError, match="possibly compressed"):
        read_table(tmp_path / "t.xlsx.gz")


def test_a_file_without_a_header_row_is_named_as_such(tmp_path):
    (tmp_path / "nohdr.csv").write_text("0.5,1.25,3\n0.1,2.0,4\n0.3,1.0,5\n")
    frame = read_table(tmp_path / "nohdr.csv")
    with pytest.raises(TableError, match="first row holds only numbers.*needs a header row"):
        TableSchema.infer(frame, "y")
    with pytest.raises(TableError) as info:  # a real header: no such hint
        TableSchema.infer(_frame(), "price")
    assert "header" not in str(info.value)


def test_inference_of_column_kinds_and_overrides():
    frame = _frame()
    schema, X, y = TableSchema.infer(frame, "y", drop=["id"])
    assert schema.features == ["x", "code", "colour", "flag"]
    assert schema.kinds == {"x": "numeric", "code": "numeric", "colour": "categorical", "flag": "categorical"}
    assert schema.levels["colour"] == ["blue", "red"]
    assert schema.levels["flag"] == ["False", "True"]
    schema, _, _ = TableSchema.infer(frame, "y", drop=["id"], categorical=["code"])
    assert schema.kinds["code"] == "categorical" and schema.levels["code"] == ["0", "1", "2"]
    np.testing.assert_array_equal(y, frame["y"].to_numpy())


def test_missing_target_suggests_close_names():
    with pytest.raises(TableError, match=r"target column 'Y ' is not in the table.*Did you mean 'y'"):
        TableSchema.infer(_frame(), "Y ", drop=["id"])
    with pytest.raises(TableError, match=r"--drop column 'idd'.*Did you mean 'id'"):
        TableSchema.infer(_frame(), "y", drop=["idd"])


def test_identifier_text_column_is_rejected_with_fix():
    frame = _frame(60)
    with pytest.raises(TableError, match=r"Column 'id' .*60 distinct values.*--drop id"):
        TableSchema.infer(frame, "y")


def test_text_in_numeric_column_names_rows_and_values():
    frame = _frame()
    frame["x"] = frame["x"].astype(object)
    frame.loc[3, "x"] = "n/a?"
    frame.loc[7, "x"] = "1,5"
    with pytest.raises(TableError, match=r"Column 'x' should hold numbers, but rows 4, 8 contain '1,5', 'n/a\?'"):
        TableSchema.infer(frame, "y", drop=["id"])


def test_missing_values_list_columns_and_rows():
    frame = _frame()
    frame.loc[2, "x"] = np.nan
    frame.loc[5, "colour"] = None
    frame.loc[5, "y"] = np.nan
    frame.loc[7, "colour"] = None
    # a missing target drops its row (never imputed); the feature cells left are named, with every remedy
    with pytest.raises(TableError, match=r"'x' \(rows 3\); 'colour' \(rows 8\).*--drop-missing.*--model oak"):
        TableSchema.infer(frame, "y", drop=["id"])
    schema, X, y = TableSchema.infer(frame, "y", drop=["id"], drop_missing=True)
    assert len(X) == len(y) == 9
    assert schema.notes[0].startswith("Dropped 1 of 12 rows whose target 'y' is missing (rows 6); a target is never "
                                      "imputed.")
    assert schema.notes[1].startswith("Dropped 2 of 11 rows with a missing value (missing cells per column: "
                                      "'x' (1), 'colour' (1);")
    # at predict time the remedies are completing the rows, predict --drop-missing, or an OAK model
    with pytest.raises(TableError, match=r"'x' \(rows 3\).*NA, N/A.*predict --drop-missing.*OAK"):
        schema.encode(frame)
    # a model that takes missing cells (OAK): rows kept with a note, NaN in the inputs
    schema, X, y = TableSchema.infer(frame, "y", drop=["id"], keep_missing=True)
    assert len(X) == len(y) == 11
    assert schema.notes[1] == ("2 of 11 rows have missing feature cells (per column: 'x' (1), 'colour' (1)); they are "
                               "kept: the model marginalises each missing feature over its input measure.")
    encoded = schema.encode(X, missing="keep")
    assert encoded.isna().sum().to_dict() == {"x": 1, "colour": 1, **{c: 0 for c in encoded.columns if c not in
                                                                      ("x", "colour")}}
    assert "nan" not in schema.levels["colour"]


def test_bad_cells_of_every_column_in_one_message():
    frame = _frame()
    frame["x"] = frame["x"].astype(object)
    frame["z"] = frame["x"].astype(object)
    frame.loc[3, "x"] = "oops"
    frame.loc[6, "z"] = "zz"
    with pytest.raises(TableError, match=r"2 columns have bad cells: Column 'x'.*rows 4.*'oops'.*Column 'z'.*rows 7"):
        TableSchema.infer(frame, "y", drop=["id"])
    schema, _, _ = TableSchema.infer(_frame().assign(z=_frame()["x"]), "y", drop=["id"])
    new = _frame().assign(z=_frame()["x"]).astype({"x": object, "z": object})
    new.loc[1, "x"], new.loc[2, "z"] = "a", "b"
    new.loc[4, "colour"] = "green"
    with pytest.raises(TableError, match=r"3 columns have bad cells: Column 'x'.*rows 2.*"
                                         r"Column 'colour' has value\(s\) 'green' in rows 5.*Column 'z'.*rows 3"):
        schema.encode(new)


def test_target_needs_two_values_and_numbers():
    frame = _frame()
    frame["y"] = 1.0
    with pytest.raises(TableError, match="1 distinct value"):
        TableSchema.infer(frame, "y", drop=["id"])
    with pytest.raises(TableError, match="target must be numeric"):
        TableSchema.infer(_frame(), "colour", drop=["id"])


def test_encode_codes_and_onehot_and_column_checks():
    frame = _frame()
    schema, X, _ = TableSchema.infer(frame, "y", drop=["id"])
    codes = schema.encode(frame)
    assert list(codes.columns) == ["x", "code", "colour", "flag"]
    np.testing.assert_array_equal(codes["colour"], (frame["colour"] == "red").astype(float))
    schema.encoding = "onehot"
    onehot = schema.encode(frame[::-1])  # any column/row order; extra columns ignored
    assert list(onehot.columns) == schema.encoded_names == ["x", "code", "colour=blue", "colour=red",
                                                           "flag=False", "flag=True"]
    np.testing.assert_array_equal(onehot.index, frame.index[::-1])
    with pytest.raises(TableError, match=r"missing the column\(s\) 'colour'"):
        schema.encode(frame.drop(columns="colour"))
    bad = frame.copy()
    bad.loc[1, "colour"] = "green"
    with pytest.raises(TableError, match=r"'green' in rows 2 that the model never saw.*known: 'blue', 'red'.*"
                                          r"--unknown-levels ignore"):
        schema.encode(bad)
    # ignored: no known level (all indicators 0; code -1 for models that read codes), with a warning
    with pytest.warns(HDGPWarning, match=r"'green' in rows 2 .*no known level \(all its indicator columns 0\)"):
        ignored = schema.encode(bad, unknown="ignore")
    assert ignored.loc[1, ["colour=blue", "colour=red"]].tolist() == [0.0, 0.0]
    pd.testing.assert_frame_equal(ignored.drop(index=1), schema.encode(frame).drop(index=1))
    schema.encoding = "codes"
    with pytest.warns(HDGPWarning, match="the average effect of the column"):
        assert schema.encode(bad, unknown="ignore").loc[1, "colour"] == -1.0
    with pytest.raises(ValueError, match="unknown must be 'error' or 'ignore'"):
        schema.encode(frame, unknown="skip")
    schema.encoding = "onehot"
    bad = frame.copy()
    bad["x"] = bad["x"].astype(object)
    bad.loc[0, "x"] = "abc"
    with pytest.raises(TableError, match=r"Column 'x' should hold numbers, but rows 1"):
        schema.encode(bad)


def test_numbers_stored_as_text_are_numeric():
    frame = _frame()
    frame["x"] = frame["x"].map(lambda v: f"{v:.3f}")
    schema, X, _ = TableSchema.infer(frame, "y", drop=["id"])
    assert schema.kinds["x"] == "numeric"
    np.testing.assert_allclose(schema.encode(frame)["x"], frame["x"].astype(float))


@pytest.mark.parametrize("column", ["x", "y"])
def test_infinite_cells_are_named_by_column_and_row(column):
    frame = pd.DataFrame({"x": np.arange(8.0), "y": np.arange(8.0) ** 2})
    frame.loc[5, column] = np.inf
    for table in (frame, frame.astype(str)):  # a float, or the text "inf" in a CSV cell
        with pytest.raises(TableError, match=rf"Column '{column}' holds infinite values in rows 6\."):
            schema, X, _ = TableSchema.infer(table, "y")
            schema.encode(X)


def test_values_whose_squares_overflow_are_refused_at_the_estimator():
    import hdgp

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(20, 2)), rng.normal(size=20)
    X[3, 1], y_big = 1e300, y.copy()
    y_big[4] = -1e300
    for name in ("RBF-ARD", "OAK", "SIGP", "GP-classifier"):
        est = hdgp.preset(name)
        with pytest.raises(ValueError, match=r"Feature column\(s\) 1 have values too large to standardise"):
            est.fit(X, (y > 0).astype(int) if name == "GP-classifier" else y)
    for name in ("RBF-ARD", "SIGP"):
        with pytest.raises(ValueError, match="The target has values too large to standardise"):
            hdgp.preset(name).fit(X[:, :1], y_big)
    named = pd.DataFrame(X, columns=["a", "b"])  # a DataFrame's columns are named in the message
    for name in ("RBF-ARD", "SIGP", "GP-classifier"):
        with pytest.raises(ValueError, match=r"Feature column\(s\) 'b' have values too large"):
            hdgp.preset(name).fit(named, (y > 0).astype(int) if name == "GP-classifier" else y)


def test_text_target_for_a_regressor_is_a_clear_error():
    import hdgp

    X = np.random.default_rng(0).normal(size=(30, 2))
    for name in ("RBF-ARD", "OAK", "SIGP"):
        with pytest.raises(ValueError, match=r"regression target must be numeric; got values such as 'a'.*classifier"):
            hdgp.preset(name).fit(X, np.array(["a", "b", "c"] * 10))


@pytest.mark.parametrize("column", ["x", "y"])
def test_numbers_with_thousands_separators_are_named_not_taken_for_categories(column):
    frame = pd.DataFrame({"x": np.linspace(1000, 90000, 30), "y": np.linspace(-5000, 5000, 30)})
    frame[column] = [f"{v:,.2f}" for v in frame[column]]
    with pytest.raises(TableError, match=rf"Column '{column}' holds numbers written with separators \(e.g. '"):
        TableSchema.infer(frame, "y")


def test_table_must_be_a_frame_with_unique_column_names():
    with pytest.raises(TypeError, match="pandas DataFrame with named columns, got ndarray"):
        TableSchema.infer(np.zeros((5, 2)), "y")
    frame = pd.DataFrame(np.arange(30.0).reshape(10, 3), columns=["a", "a", "y"])
    with pytest.raises(TableError, match="several columns named 'a'"):
        TableSchema.infer(frame, "y")


def test_date_columns_enter_the_model_as_days_and_parse_alike_at_predict_time():
    """Dates (text in a CSV, or a datetime dtype) are one numeric input, not categories or an identifier."""
    from hdgp.workflow import fit_table

    rng = np.random.default_rng(0)
    days = pd.date_range("2021-01-01", periods=60, freq="3D")
    frame = pd.DataFrame({"when": days.strftime("%Y-%m-%d"), "x": rng.normal(size=60)})
    frame["y"] = np.sin(np.arange(60) / 8) + 0.3 * frame["x"]
    schema, X, _ = TableSchema.infer(frame, "y")
    assert schema.kinds["when"] == "datetime"
    encoded = schema.encode(X)
    np.testing.assert_allclose(encoded["when"], (days - pd.Timestamp("1970-01-01")).days)
    typed = frame.assign(when=days)  # the same column as datetime64 (e.g. from Python)
    schema_t, X_t, _ = TableSchema.infer(typed, "y")
    assert schema_t.kinds["when"] == "datetime"
    pd.testing.assert_frame_equal(schema_t.encode(X_t), encoded)
    tm = fit_table(typed, "y", model="rbf-ard", params={"max_iter": 10}, test_size=0)
    np.testing.assert_array_equal(tm.predict(frame.head(5))["mean"], tm.predict(typed.head(5))["mean"])
    bad = frame.head(3).copy()
    bad.loc[1, "when"] = "soon"
    with pytest.raises(TableError, match="Column 'when' held dates when the model was trained, but rows 2 contain 'soon'"):
        schema.encode(bad)


def test_new_dates_must_use_the_training_format():
    """Day-first text at predict time after ISO at fit was re-guessed month-first: 30 days off, silently."""
    frame = pd.DataFrame({"when": ["2021-03-04", "2021-05-06", "2021-07-08"], "x": [1.0, 2.0, 3.0],
                          "y": [0.1, 0.2, 0.4]})
    schema, X, _ = TableSchema.infer(frame, "y")
    assert schema.date_formats == {"when": "%Y-%m-%d"}
    with pytest.raises(TableError, match=r"rows 1, 2 contain '04/03/2021', '06/05/2021' .*training format '%Y-%m-%d'"):
        schema.encode(X.assign(when=["04/03/2021", "06/05/2021", "2021-07-08"]))
    typed, X_t, _ = TableSchema.infer(frame.assign(when=pd.to_datetime(frame["when"])), "y")
    assert typed.date_formats == {}  # a datetime dtype has no text format; text still parses
    np.testing.assert_array_equal(typed.encode(X)["when"], schema.encode(X)["when"])


def test_day_first_dates_are_dates():
    """'01/01/2021, 06/01/2021, 16/01/2021, ...' fits day first only; pandas guessed month first from the
    first cell, so the column became one category per row."""
    days = pd.date_range("2021-01-01", periods=40, freq="5D")
    frame = pd.DataFrame({"when": days.strftime("%d/%m/%Y"), "y": np.arange(40.0)})
    schema, X, _ = TableSchema.infer(frame, "y")
    assert schema.kinds["when"] == "datetime" and schema.date_formats == {"when": "%d/%m/%Y"}
    np.testing.assert_allclose(schema.encode(X)["when"], (days - pd.Timestamp("1970-01-01")).days)
    ambiguous = pd.DataFrame({"when": ["01/02/2021", "03/04/2021", "05/06/2021"], "y": [1.0, 2.0, 3.0]})
    assert TableSchema.infer(ambiguous, "y")[0].date_formats == {"when": "%m/%d/%Y"}  # as pandas reads it


def test_a_date_column_names_the_cells_that_are_not_dates():
    frame = pd.DataFrame({"when": pd.date_range("2021-01-01", periods=40).strftime("%Y-%m-%d"), "y": np.arange(40.0)})
    frame.loc[25, "when"] = "2021-02-30"
    with pytest.raises(TableError, match=r"dates in the format '%Y-%m-%d', but rows 26 contain '2021-02-30'"):
        TableSchema.infer(frame, "y")


def test_dates_in_several_formats_are_refused_as_dates():
    days = pd.date_range("2021-01-01", periods=60, freq="5D")
    mixed = np.where(np.arange(60) % 2, days.strftime("%Y-%m-%d"), days.strftime("%d/%m/%Y"))
    frame = pd.DataFrame({"when": mixed, "y": np.arange(60.0)})
    with pytest.raises(TableError, match="Column 'when' looks like dates, but not in one format"):
        TableSchema.infer(frame, "y")


@pytest.mark.parametrize("values", [["March", "April", "May"], ["1st", "2nd", "3rd"], ["10:30", "11:45", "12:00"],
                                    ["1/2", "3/4", "5/6"]])
def test_text_that_pandas_would_read_as_dates_without_a_year_stays_categorical(values):
    frame = pd.DataFrame({"c": values * 4, "y": np.arange(12.0)})
    schema, _, _ = TableSchema.infer(frame, "y")
    assert schema.kinds["c"] == "categorical"


def test_a_written_row_index_and_constant_columns_are_left_out_with_a_note(tmp_path):
    """`df.to_csv()` without index=False adds 'Unnamed: 0' (the row number): a model would learn
    the row order. A one-valued column has no effect, and its untouched length-scale read as relevant."""
    frame = _frame(20).drop(columns="id").assign(same="one", zero=0.0)
    frame.to_csv(tmp_path / "t.csv")  # with the index
    read = read_table(tmp_path / "t.csv")
    assert "Unnamed: 0" in read.columns
    schema, X, _ = TableSchema.infer(read, "y")
    assert schema.features == ["x", "code", "colour", "flag"]
    assert schema.dropped == ["Unnamed: 0", "same", "zero"] and list(X.columns) == schema.features
    assert any("an index written by DataFrame.to_csv" in n for n in schema.notes)
    assert sum("holds the same value in every row" in n for n in schema.notes) == 2
    holed = frame.copy()
    holed.loc[5, "x"] = np.nan
    holed.to_csv(tmp_path / "holed.csv")
    schema, _, _ = TableSchema.infer(read_table(tmp_path / "holed.csv"), "y", drop_missing=True)
    assert "Unnamed: 0" in schema.dropped  # a row number as written, before the incomplete row went
    # a shuffled or filtered frame writes its labels out of order or with gaps: still an index
    shuffled = read.sample(frac=1.0, random_state=0).reset_index(drop=True)
    assert "Unnamed: 0" in TableSchema.infer(shuffled, "y")[0].dropped
    assert "Unnamed: 0" in TableSchema.infer(read.iloc[::2], "y")[0].dropped
    assert "Unnamed: 0" in TableSchema.infer(read.assign(**{"Unnamed: 0": read["Unnamed: 0"] % 5}), "y")[0].features
    with pytest.raises(TableError, match="holds the same value in every row.*No feature column is left"):
        TableSchema.infer(pd.DataFrame({"c": ["a"] * 5, "y": np.arange(5.0)}), "y")


def test_unused_categories_of_a_pandas_categorical_are_not_levels():
    frame = pd.DataFrame({"c": pd.Categorical(["a", "b"] * 5, categories=["a", "b", "unused"]),
                          "y": np.arange(10.0)})
    schema, _, _ = TableSchema.infer(frame, "y")
    assert schema.levels == {"c": ["a", "b"]}


def test_python_arguments_of_the_wrong_kind_get_clear_errors(tmp_path):
    from hdgp.workflow import fit_table

    frame = _frame(30)
    tm = fit_table(frame, "y", model="rbf-ard", drop="id", params={"max_iter": 5}, test_size=0)
    assert tm.schema.features == ["x", "code", "colour", "flag"]  # drop="id" is one column, not 'i' and 'd'
    with pytest.raises(ValueError, match="model must be a preset name or 'auto', got None"):
        fit_table(frame, "y", model=None, drop=["id"])
    with pytest.raises(ValueError, match="params must be a dict"):
        fit_table(frame, "y", model="rbf-ard", drop=["id"], params=[("max_iter", 5)])
    for model in ("oak", "auto"):  # auto used to drop OAK as a failed candidate and go on
        with pytest.raises(ValueError, match="not -p categorical_features"):
            fit_table(frame, "y", model=model, drop=["id"], params={"categorical_features": ["colour"]})
    with pytest.raises(TableError, match="Column names must be text; 0, 1 are not"):
        TableSchema.infer(pd.DataFrame({0: [1.0, 2.0, 3.0], 1: ["a", "b", "a"], "y": [1.0, 2.0, 4.0]}), "y")


def test_a_file_that_is_not_utf8_says_so(tmp_path):
    (tmp_path / "latin1.csv").write_bytes("a,b,y\ncaf\xe9,1,2\n".encode("latin-1"))
    with pytest.raises(TableError, match=r"unexpected end of data\. Check .* Save it with UTF-8 text encoding\."):
        read_table(tmp_path / "latin1.csv")


def test_true_false_column_with_missing_cells_stays_categorical(tmp_path):
    """pandas reads a true/false column with empty cells as objects (bools and NaN); without those
    rows it is still a true/false column, categorical as it is without missing cells."""
    frame = pd.DataFrame({"a": np.arange(8.0), "flag": [True, False, None, True, False, True, None, False],
                          "y": np.arange(8.0) ** 2})
    frame.to_csv(tmp_path / "t.csv", index=False)
    read = read_table(tmp_path / "t.csv")
    assert read["flag"].dtype == object
    schema, X, _ = TableSchema.infer(read, "y", drop_missing=True)
    assert schema.kinds["flag"] == "categorical" and len(X) == 6
    clean = read.dropna().astype({"flag": bool})  # the same rows read without missing cells
    np.testing.assert_array_equal(schema.encode(clean.drop(columns="y")), schema.encode(read.dropna().drop(columns="y")))


def test_missing_column_hint_suggests_only_columns_the_model_does_not_use():
    frame = pd.DataFrame({f"num{i}": np.arange(6.0) * i for i in range(1, 5)} | {"y": np.arange(6.0)})
    schema, _, _ = TableSchema.infer(frame, "y")
    with pytest.raises(TableError, match="missing the column\\(s\\) 'num3' that the model was trained on. "
                                         "Did you mean 'nun3'\\?"):
        schema.check_columns(frame.rename(columns={"num3": "nun3"}))
    with pytest.raises(TableError) as info:
        schema.check_columns(frame.drop(columns="num3"))
    assert "Did you mean" not in str(info.value)  # num1, num2, num4 are present and needed themselves


def test_identifier_like_column_gets_a_note_but_stays():
    frame = pd.DataFrame({"id": np.arange(10, 20), "customer_id": np.arange(10)[::-1], "x": np.linspace(0, 1, 10),
                          "year": np.arange(2000, 2010), "y": np.arange(10.0)})
    schema, X, _ = TableSchema.infer(frame, "y")
    notes = [n for n in schema.notes if "named like an identifier" in n]
    assert len(notes) == 2 and "--drop id" in notes[0] and "--drop customer_id" in notes[1]
    assert {"id", "customer_id", "year"} <= set(schema.features)  # year: unique integers, but not an identifier


def test_the_header_is_split_on_the_given_separator(tmp_path):
    (tmp_path / "dup.csv").write_text("a;a;b;y\n1;2;3;4\n5;6;7;8\n")
    with pytest.raises(TableError, match=r"duplicated column names \['a'\]"):
        read_table(tmp_path / "dup.csv", sep=";")
    (tmp_path / "commas.csv").write_text("v,u;w,v;y\n1;2;3\n")  # split on commas it would repeat 'v'
    assert list(read_table(tmp_path / "commas.csv", sep=";").columns) == ["v,u", "w,v", "y"]


def test_boolean_cells_in_other_spellings_are_the_training_levels(tmp_path):
    """pandas reads TRUE/true/True as one bool; a model file's categorical columns are read back as text."""
    frame = _frame(20).drop(columns="id")
    frame.assign(flag=frame.flag.map({True: "TRUE", False: "FALSE"})).to_csv(tmp_path / "t.csv", index=False)
    schema, X, _ = TableSchema.infer(read_table(tmp_path / "t.csv"), "y")
    assert schema.levels["flag"] == ["False", "True"]
    as_text = read_table(tmp_path / "t.csv", text_columns=schema.categorical)
    assert as_text.flag.iloc[0] in ("TRUE", "FALSE")
    spelled = as_text.assign(flag=[("true" if v == "TRUE" else "false") for v in as_text.flag])
    expected = schema.encode(X)
    for table in (as_text, spelled):
        pd.testing.assert_frame_equal(schema.encode(table), expected)


def test_text_with_about_a_value_per_row_is_refused_unless_declared():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"name": [f"n{i}" for i in range(40)], "x": rng.normal(size=40), "y": rng.normal(size=40)})
    with pytest.raises(TableError, match="'name' holds text with 40 distinct values in 40 rows.*at most one per two"):
        TableSchema.infer(frame, "y")
    frame["name"] = [f"n{i // 2}" for i in range(40)]  # 20 levels, two rows each: a category
    assert TableSchema.infer(frame, "y")[0].kinds["name"] == "categorical"
    frame["name"] = [f"n{i}" for i in range(30)] + ["n0"] * 10
    assert TableSchema.infer(frame, "y", categorical=["name"])[0].kinds["name"] == "categorical"


def test_an_empty_column_is_left_out_with_a_note(tmp_path):
    (tmp_path / "t.csv").write_text("x,z,y,\n" + "".join(f"{i},{i % 3},{2 * i}.5,\n" for i in range(8)))
    read = read_table(tmp_path / "t.csv")
    schema, X, _ = TableSchema.infer(read, "y")
    assert schema.features == ["x", "z"] and read.columns[-1] in schema.dropped
    assert any("is empty in every row" in n for n in schema.notes)
    with pytest.raises(TableError, match="missing"):  # nothing but empty columns: the missing cells are named
        TableSchema.infer(pd.DataFrame({"e": [np.nan] * 4, "y": np.arange(4.0)}), "y")


def test_a_value_far_from_all_others_gets_a_note():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.normal(size=50), "z": rng.lognormal(sigma=2, size=50), "y": rng.normal(size=50)})
    assert TableSchema.infer(frame, "y")[0].notes == []  # a heavy tail is no typo
    frame.loc[7, "x"] = 1e12
    notes = TableSchema.infer(frame, "y")[0].notes
    assert len(notes) == 1 and "'x' has a value far from all others (row 8: 1e+12" in notes[0]
