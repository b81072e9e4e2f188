"""The OpenAI cookbook's function-calling SQL agent ("How to call functions with chat models"), as its users run it.

A plain ``openai`` client loop: the model gets the ``ask_database`` tool (its description holds the database
schema), ``tool_choice="auto"``; the loop appends ``response.choices[0].message`` and a ``{"role": "tool", ...}``
message with the query's rows, and asks again for the answer. Two lines make it replayable: ``orp.instrument()``
and ``@orp.agent`` on the outer call (or the ``with orp.agent(...)`` form in :func:`answer`). The recommended
setup also decorates the tool with ``@orp.tool``; ``RW_DECORATE=0`` leaves it undecorated, as a user who adds
only the two lines would.

The one real side effect: every query ``ask_database`` runs is appended to ``$RW_OUTBOX/queries.log`` (an
audit log), when ``RW_OUTBOX`` is set. The database is the SQLite file ``$RW_DB`` (a small Chinook-like
catalogue the test creates).

Test knobs (each stands for an edit of the code): ``RW_SYSTEM_PROMPT`` replaces the system prompt,
``RW_MAX_RESULT_CHARS`` cuts the rows sent back to the model. ``python rw_cookbook_sql_agent.py QUESTION``
runs :func:`main`; with ``RW_FORM=with``, :func:`answer`; ``--zero-code`` skips ``orp.instrument()`` (for
``opentelemetry-instrument``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys

from openai import OpenAI

import otel_replay as orp

if "--zero-code" not in sys.argv:
    orp.instrument()

GPT_MODEL = "gpt-4o"
client = OpenAI()
conn = sqlite3.connect(os.environ["RW_DB"])


def get_table_names(conn: sqlite3.Connection) -> list[str]:
    """Return a list of table names."""
    table_names = []
    tables = conn.execute("SELECT name FROM sqlite_master WHERE type='table';")
    for table in tables.fetchall():
        table_names.append(table[0])
    return table_names


def get_column_names(conn: sqlite3.Connection, table_name: str) -> list[str]:
    """Return a list of column names."""
    column_names = []
    columns = conn.execute(f"PRAGMA table_info('{table_name}');").fetchall()
    for col in columns:
        column_names.append(col[1])
    return column_names


def get_database_info(conn: sqlite3.Connection) -> list[dict[str, object]]:
    """Return a list of dicts containing the table name and columns for each table in the database."""
    table_dicts = []
    for table_name in get_table_names(conn):
        columns_names = get_column_names(conn, table_name)
        table_dicts.append({"table_name": table_name, "column_names": columns_names})
    return table_dicts


database_schema_dict = get_database_info(conn)
database_schema_string = "\n".join(
    [
        f"Table: {table['table_name']}\nColumns: {', '.join(table['column_names'])}"  # type: ignore[arg-type]
        for table in database_schema_dict
    ]
)

tools = [
    {
        "type": "function",
        "function": {
            "name": "ask_database",
            "description": "Use this function to answer user questions about music. Input should be a fully formed "
            "SQL query.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": f"""
                                SQL query extracting info to answer the user's question.
                                SQL should be written using this database schema:
                                {database_schema_string}
                                The query should be returned in plain text, not in JSON.
                                """,
                    }
                },
                "required": ["query"],
            },
        },
    }
]

SYSTEM_PROMPT = os.environ.get(
    "RW_SYSTEM_PROMPT", "Answer user questions by generating SQL queries against the Chinook Music Database."
)


def ask_database(query: str) -> str:
    """Function to query SQLite database with a provided SQL query."""
    try:
        results = str(conn.execute(query).fetchall())
    except Exception as e:  # noqa: BLE001 - the cookbook hands the error to the model
        results = f"query failed with error: {e}"
    outbox = os.environ.get("RW_OUTBOX")
    if outbox:
        with open(os.path.join(outbox, "queries.log"), "a", encoding="utf-8") as log:
            log.write(f"{query}\n")
    return results


if os.environ.get("RW_DECORATE", "1") == "1":
    # The recommended setup: the tool is a step, answered from the recording by every replay but live, and
    # run by a live replay only with --approve ask_database (it writes the audit log).
    ask_database = orp.tool(risk="write")(ask_database)


def _loop(question: str) -> str | None:
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}]
    response = client.chat.completions.create(model=GPT_MODEL, messages=messages, tools=tools, tool_choice="auto")
    response_message = response.choices[0].message
    messages.append(response_message)  # type: ignore[arg-type]
    tool_calls = response_message.tool_calls
    if not tool_calls:
        return response_message.content
    tool_call_id = tool_calls[0].id
    tool_function_name = tool_calls[0].function.name
    tool_query_string = json.loads(tool_calls[0].function.arguments)["query"]
    if tool_function_name != "ask_database":
        return f"Error: function {tool_function_name} does not exist"
    results = ask_database(tool_query_string)
    limit = os.environ.get("RW_MAX_RESULT_CHARS")
    if limit:
        results = results[: int(limit)]
    messages.append({"role": "tool", "tool_call_id": tool_call_id, "name": tool_function_name, "content": results})
    model_response_with_function_call = client.chat.completions.create(model=GPT_MODEL, messages=messages)
    return model_response_with_function_call.choices[0].message.content


@orp.agent("cookbook-sql-agent")
def main(question: str) -> str | None:
    """The cookbook's loop, one run per call."""
    return _loop(question)


def answer(question: str) -> str | None:
    """The same loop marked with the context-manager form (code with no single function to decorate)."""
    with orp.agent("cookbook-sql-agent", input=question) as run:
        run.output = _loop(question)
    return run.output


if __name__ == "__main__":
    words = [a for a in sys.argv[1:] if a != "--zero-code"]
    text = " ".join(words) or "What is the name of the album with the most tracks?"
    print(answer(text) if os.environ.get("RW_FORM") == "with" else main(text))
