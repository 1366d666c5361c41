"""Recording runs to rosbag2 and reading them back (rosbags; no ROS install needed to read)."""
