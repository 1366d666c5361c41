"""rosbag2 files: writing (bagfile), reading (reader) and the message types (typestore),
with rosbags only (no ROS install needed to read)."""
