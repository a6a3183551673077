"""StreamsGroupTopologyDescriptionUpdate (API key 93, KIP-1331): a streams group member sends
the full description of its topology (every node of every subtopology, and the global stores)
after a heartbeat answer asked for it with ``topology_description_required``. The broker keeps it
in its topology description store, and StreamsGroupDescribe v1 shows it. One version, flexible.
"""

from protocol.schema import INT8, INT16, INT32, STRING, ArrayOf, array, f, message, struct

# Kafka's common structs, one instance each so that every field of a type holds the same class.
_NODE_FIELDS = (
    f("name", STRING, about="The node's name (KSTREAM-SOURCE-0000000000, ...)."),
    f("node_type", INT8, about="1 source, 2 processor, 3 sink."),
    f("source_topics", ArrayOf(STRING), about="The topics a source node reads; empty for other nodes."),
    f("sink_topic", STRING, nullable="0+", default=None,
      about="The topic a sink node writes; null for other nodes or a topic chosen per record."),
    f("stores", ArrayOf(STRING), about="The state stores a processor node uses; empty for other nodes."),
    f("successors", ArrayOf(STRING), about="The names of the nodes this node forwards to."),
)
_NODE = struct("TopologyDescriptionNode", *_NODE_FIELDS)

StreamsGroupTopologyDescriptionUpdateRequest = message(
    "StreamsGroupTopologyDescriptionUpdateRequest",
    [
        f("group_id", STRING, about="The streams group."),
        f("member_id", STRING, about="The member sending the description: it must be in the group."),
        f("topology_epoch", INT32, about="The epoch of the described topology: the group's current one."),
        f(
            "topology_description",
            struct(
                "TopologyDescription",
                f("subtopologies",
                  array("TopologyDescriptionSubtopology",
                        f("subtopology_id", STRING, about="The subtopology's id, unique in the topology."),
                        f("nodes", array("TopologyDescriptionNode", *_NODE_FIELDS),
                          about="The subtopology's processing nodes.")),
                  about="The subtopologies of the topology."),
                f("global_stores",
                  array("TopologyDescriptionGlobalStore",
                        f("source", _NODE, about="The source node feeding the global store."),
                        f("processor", _NODE, about="The processor node filling the global store.")),
                  about="The global state stores of the topology."),
            ),
            about="The topology description.",
        ),
    ],
    api_key=93,
    valid="0",
    flexible="0+",
)

StreamsGroupTopologyDescriptionUpdateResponse = message(
    "StreamsGroupTopologyDescriptionUpdateResponse",
    [
        f("throttle_time_ms", INT32, about="Time the request was throttled for a quota, in ms."),
        f("error_code", INT16, about="0, or why the description was not stored."),
        f("error_message", STRING, nullable="0+", default=None, about="The error's detail, or null."),
    ],
    api_key=93,
    valid="0",
    flexible="0+",
)
