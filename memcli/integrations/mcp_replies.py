# ruff: noqa: E501
"""What the `mcp` SDK answers to the discovery requests `memcli mcp` answers early
(see memcli.integrations.mcp_server). Generated; do not edit: run
`python -m memcli.integrations.mcp_server --write-replies` after changing a tool or
the SDK."""

import json

SDK_VERSION = '2.3.0'

_RAW = json.loads(r'''{
 "initialize 2024-11-05": {
  "capabilities": {
   "prompts": {
    "listChanged": false
   },
   "resources": {
    "listChanged": false,
    "subscribe": false
   },
   "tools": {
    "listChanged": false
   }
  },
  "instructions": "memcli keeps this project's long-term memories. Call `recall` with what you are about to work on before starting; `remember` what you learnt that will matter later (a procedure, a fact, a decision); `forget` a memory that turned out wrong.",
  "protocolVersion": "2024-11-05",
  "serverInfo": {
   "name": "memcli",
   "version": ""
  }
 },
 "initialize 2025-03-26": {
  "capabilities": {
   "prompts": {
    "listChanged": false
   },
   "resources": {
    "listChanged": false,
    "subscribe": false
   },
   "tools": {
    "listChanged": false
   }
  },
  "instructions": "memcli keeps this project's long-term memories. Call `recall` with what you are about to work on before starting; `remember` what you learnt that will matter later (a procedure, a fact, a decision); `forget` a memory that turned out wrong.",
  "protocolVersion": "2025-03-26",
  "serverInfo": {
   "name": "memcli",
   "version": ""
  }
 },
 "initialize 2025-06-18": {
  "capabilities": {
   "prompts": {
    "listChanged": false
   },
   "resources": {
    "listChanged": false,
    "subscribe": false
   },
   "tools": {
    "listChanged": false
   }
  },
  "instructions": "memcli keeps this project's long-term memories. Call `recall` with what you are about to work on before starting; `remember` what you learnt that will matter later (a procedure, a fact, a decision); `forget` a memory that turned out wrong.",
  "protocolVersion": "2025-06-18",
  "serverInfo": {
   "name": "memcli",
   "version": ""
  }
 },
 "initialize 2025-11-25": {
  "capabilities": {
   "prompts": {
    "listChanged": false
   },
   "resources": {
    "listChanged": false,
    "subscribe": false
   },
   "tools": {
    "listChanged": false
   }
  },
  "instructions": "memcli keeps this project's long-term memories. Call `recall` with what you are about to work on before starting; `remember` what you learnt that will matter later (a procedure, a fact, a decision); `forget` a memory that turned out wrong.",
  "protocolVersion": "2025-11-25",
  "serverInfo": {
   "name": "memcli",
   "version": ""
  }
 },
 "latest_handshake": "2025-11-25",
 "listen_versions": [
  "2026-07-28"
 ],
 "prompts/list 2024-11-05": {
  "prompts": []
 },
 "prompts/list 2025-03-26": {
  "$same_as": "prompts/list 2024-11-05"
 },
 "prompts/list 2025-06-18": {
  "$same_as": "prompts/list 2024-11-05"
 },
 "prompts/list 2025-11-25": {
  "$same_as": "prompts/list 2024-11-05"
 },
 "prompts/list 2026-07-28": {
  "_meta": {
   "io.modelcontextprotocol/serverInfo": {
    "name": "memcli",
    "version": ""
   }
  },
  "cacheScope": "private",
  "prompts": [],
  "resultType": "complete",
  "ttlMs": 0
 },
 "resources/list 2024-11-05": {
  "resources": []
 },
 "resources/list 2025-03-26": {
  "$same_as": "resources/list 2024-11-05"
 },
 "resources/list 2025-06-18": {
  "$same_as": "resources/list 2024-11-05"
 },
 "resources/list 2025-11-25": {
  "$same_as": "resources/list 2024-11-05"
 },
 "resources/list 2026-07-28": {
  "_meta": {
   "io.modelcontextprotocol/serverInfo": {
    "name": "memcli",
    "version": ""
   }
  },
  "cacheScope": "private",
  "resources": [],
  "resultType": "complete",
  "ttlMs": 0
 },
 "server/discover 2026-07-28": {
  "_meta": {
   "io.modelcontextprotocol/serverInfo": {
    "name": "memcli",
    "version": ""
   }
  },
  "cacheScope": "private",
  "capabilities": {
   "prompts": {
    "listChanged": true
   },
   "resources": {
    "listChanged": true,
    "subscribe": true
   },
   "tools": {
    "listChanged": true
   }
  },
  "instructions": "memcli keeps this project's long-term memories. Call `recall` with what you are about to work on before starting; `remember` what you learnt that will matter later (a procedure, a fact, a decision); `forget` a memory that turned out wrong.",
  "resultType": "complete",
  "supportedVersions": [
   "2026-07-28"
  ],
  "ttlMs": 0
 },
 "tools/list 2024-11-05": {
  "tools": [
   {
    "description": "Find the memories that match what you are working on, best first. Give a few\n        words about the task or question. agent: your agent id, to search only your own\n        memories, your team's and global ones; without it, every agent's.",
    "inputSchema": {
     "properties": {
      "agent": {
       "anyOf": [
        {
         "type": "string"
        },
        {
         "type": "null"
        }
       ],
       "default": null,
       "title": "Agent"
      },
      "limit": {
       "anyOf": [
        {
         "type": "integer"
        },
        {
         "type": "null"
        }
       ],
       "default": null,
       "title": "Limit"
      },
      "query": {
       "title": "Query",
       "type": "string"
      }
     },
     "required": [
      "query"
     ],
     "title": "recallArguments",
     "type": "object"
    },
    "name": "recall",
    "outputSchema": {
     "additionalProperties": true,
     "title": "recallDictOutput",
     "type": "object"
    }
   },
   {
    "description": "Write a memory and return its id. type: episodic, semantic, procedural or working;\n        scope: agent (scope_id = your agent id), team (scope_id = the team) or global. A\n        near-identical memory already there is updated instead, and its id returned.",
    "inputSchema": {
     "properties": {
      "details": {
       "anyOf": [
        {
         "type": "string"
        },
        {
         "type": "null"
        }
       ],
       "default": null,
       "title": "Details"
      },
      "priority": {
       "anyOf": [
        {
         "type": "string"
        },
        {
         "type": "null"
        }
       ],
       "default": null,
       "title": "Priority"
      },
      "scope": {
       "title": "Scope",
       "type": "string"
      },
      "scope_id": {
       "anyOf": [
        {
         "type": "string"
        },
        {
         "type": "null"
        }
       ],
       "default": null,
       "title": "Scope Id"
      },
      "subtype": {
       "title": "Subtype",
       "type": "string"
      },
      "summary": {
       "title": "Summary",
       "type": "string"
      },
      "tags": {
       "anyOf": [
        {
         "items": {
          "type": "string"
         },
         "type": "array"
        },
        {
         "type": "null"
        }
       ],
       "default": null,
       "title": "Tags"
      },
      "type": {
       "title": "Type",
       "type": "string"
      }
     },
     "required": [
      "summary",
      "type",
      "subtype",
      "scope"
     ],
     "title": "rememberArguments",
     "type": "object"
    },
    "name": "remember",
    "outputSchema": {
     "additionalProperties": true,
     "title": "rememberDictOutput",
     "type": "object"
    }
   },
   {
    "description": "The whole record of one memory (live or archived), by id.",
    "inputSchema": {
     "properties": {
      "id": {
       "title": "Id",
       "type": "string"
      }
     },
     "required": [
      "id"
     ],
     "title": "showArguments",
     "type": "object"
    },
    "name": "show",
    "outputSchema": {
     "additionalProperties": true,
     "title": "showDictOutput",
     "type": "object"
    }
   },
   {
    "description": "Archive a memory that is wrong or no longer useful (reason `forgotten`, or the one\n        given). A person can bring it back with `memcli restore ID`.",
    "inputSchema": {
     "properties": {
      "id": {
       "title": "Id",
       "type": "string"
      },
      "reason": {
       "anyOf": [
        {
         "type": "string"
        },
        {
         "type": "null"
        }
       ],
       "default": null,
       "title": "Reason"
      }
     },
     "required": [
      "id"
     ],
     "title": "forgetArguments",
     "type": "object"
    },
    "name": "forget",
    "outputSchema": {
     "additionalProperties": true,
     "title": "forgetDictOutput",
     "type": "object"
    }
   }
  ]
 },
 "tools/list 2025-03-26": {
  "$same_as": "tools/list 2024-11-05"
 },
 "tools/list 2025-06-18": {
  "$same_as": "tools/list 2024-11-05"
 },
 "tools/list 2025-11-25": {
  "$same_as": "tools/list 2024-11-05"
 },
 "tools/list 2026-07-28": {
  "_meta": {
   "io.modelcontextprotocol/serverInfo": {
    "name": "memcli",
    "version": ""
   }
  },
  "cacheScope": "private",
  "resultType": "complete",
  "tools": [
   {
    "description": "Find the memories that match what you are working on, best first. Give a few\n        words about the task or question. agent: your agent id, to search only your own\n        memories, your team's and global ones; without it, every agent's.",
    "inputSchema": {
     "properties": {
      "agent": {
       "anyOf": [
        {
         "type": "string"
        },
        {
         "type": "null"
        }
       ],
       "default": null,
       "title": "Agent"
      },
      "limit": {
       "anyOf": [
        {
         "type": "integer"
        },
        {
         "type": "null"
        }
       ],
       "default": null,
       "title": "Limit"
      },
      "query": {
       "title": "Query",
       "type": "string"
      }
     },
     "required": [
      "query"
     ],
     "title": "recallArguments",
     "type": "object"
    },
    "name": "recall",
    "outputSchema": {
     "additionalProperties": true,
     "title": "recallDictOutput",
     "type": "object"
    }
   },
   {
    "description": "Write a memory and return its id. type: episodic, semantic, procedural or working;\n        scope: agent (scope_id = your agent id), team (scope_id = the team) or global. A\n        near-identical memory already there is updated instead, and its id returned.",
    "inputSchema": {
     "properties": {
      "details": {
       "anyOf": [
        {
         "type": "string"
        },
        {
         "type": "null"
        }
       ],
       "default": null,
       "title": "Details"
      },
      "priority": {
       "anyOf": [
        {
         "type": "string"
        },
        {
         "type": "null"
        }
       ],
       "default": null,
       "title": "Priority"
      },
      "scope": {
       "title": "Scope",
       "type": "string"
      },
      "scope_id": {
       "anyOf": [
        {
         "type": "string"
        },
        {
         "type": "null"
        }
       ],
       "default": null,
       "title": "Scope Id"
      },
      "subtype": {
       "title": "Subtype",
       "type": "string"
      },
      "summary": {
       "title": "Summary",
       "type": "string"
      },
      "tags": {
       "anyOf": [
        {
         "items": {
          "type": "string"
         },
         "type": "array"
        },
        {
         "type": "null"
        }
       ],
       "default": null,
       "title": "Tags"
      },
      "type": {
       "title": "Type",
       "type": "string"
      }
     },
     "required": [
      "summary",
      "type",
      "subtype",
      "scope"
     ],
     "title": "rememberArguments",
     "type": "object"
    },
    "name": "remember",
    "outputSchema": {
     "additionalProperties": true,
     "title": "rememberDictOutput",
     "type": "object"
    }
   },
   {
    "description": "The whole record of one memory (live or archived), by id.",
    "inputSchema": {
     "properties": {
      "id": {
       "title": "Id",
       "type": "string"
      }
     },
     "required": [
      "id"
     ],
     "title": "showArguments",
     "type": "object"
    },
    "name": "show",
    "outputSchema": {
     "additionalProperties": true,
     "title": "showDictOutput",
     "type": "object"
    }
   },
   {
    "description": "Archive a memory that is wrong or no longer useful (reason `forgotten`, or the one\n        given). A person can bring it back with `memcli restore ID`.",
    "inputSchema": {
     "properties": {
      "id": {
       "title": "Id",
       "type": "string"
      },
      "reason": {
       "anyOf": [
        {
         "type": "string"
        },
        {
         "type": "null"
        }
       ],
       "default": null,
       "title": "Reason"
      }
     },
     "required": [
      "id"
     ],
     "title": "forgetArguments",
     "type": "object"
    },
    "name": "forget",
    "outputSchema": {
     "additionalProperties": true,
     "title": "forgetDictOutput",
     "type": "object"
    }
   }
  ],
  "ttlMs": 0
 }
}''')
# most protocol versions get the same reply: each is written once, the others
# name it ({"$same_as": key}); the replies are only read, so sharing is safe
REPLIES = {key: _RAW[value["$same_as"]] if isinstance(value, dict) and "$same_as" in value else value
           for key, value in _RAW.items()}
